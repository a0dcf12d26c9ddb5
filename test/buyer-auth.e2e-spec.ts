import { Redis } from 'ioredis';
import { exportJWK, generateKeyPair, SignJWT, UnsecuredJWT } from 'jose';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KeyLayout } from '../src/redis/key-layout';
import { request, startSale, startTestApp, TestApp } from './helpers/app';
import { closeClient, startTestRedis, TestRedis, uniquePrefix } from './helpers/redis';

const ISSUER = 'https://id.test.example/';
const AUDIENCE = 'seckill';
const SECRET = 'b7Rk2pQx9LmZ4tWv0cHs6NdJ3fYg8aUe';
const HMAC = new TextEncoder().encode(SECRET);
const AUTH = { BUYER_AUTH_ISSUER: ISSUER, BUYER_AUTH_AUDIENCE: AUDIENCE };

/** A buyer token as an identity provider would mint it, each claim overridable. */
function token(sub: string, claims: { iss?: string; aud?: string; exp?: number | string | null } = {}) {
  const jwt = new SignJWT({})
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(sub)
    .setIssuer(claims.iss ?? ISSUER)
    .setAudience(claims.aud ?? AUDIENCE)
    .setIssuedAt();
  if (claims.exp !== null) jwt.setExpirationTime(claims.exp ?? '5m');
  return jwt.sign(HMAC);
}

/**
 * BUYER_AUTH (src/door/buyer-auth.ts): the buyer is the token's sub, checked before
 * the body is read; every refusal is a 401/403 with its own code and changes nothing.
 */
describe('who the buyer is: BUYER_AUTH', () => {
  let redis: TestRedis;
  let client: Redis;
  const apps: TestApp[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'seckill-buyer-auth-'));

  beforeAll(async () => {
    redis = await startTestRedis();
    client = new Redis(redis.url);
  });
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    await closeClient(client);
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function app(env: Record<string, string>, prefix = uniquePrefix('buyer')): Promise<TestApp> {
    const started = await startTestApp({ REDIS_URL: redis.url, KEY_PREFIX: prefix, ...AUTH, ...env });
    apps.push(started);
    await startSale(started.url, 'phone', 10, 2);
    return started;
  }
  const buy = (url: string, userId: string, bearer?: string, raw?: string) =>
    request(url, 'POST', '/api/orders', {
      ...(raw === undefined ? { json: { productId: 'phone', userId } } : { raw }),
      headers: {
        'content-type': 'application/json',
        ...(bearer === undefined ? {} : { authorization: `Bearer ${bearer}` }),
      },
    });

  describe('with an HS256 secret', () => {
    let url: string;
    let keys: KeyLayout;
    beforeAll(async () => {
      const prefix = uniquePrefix('hs256');
      keys = new KeyLayout(prefix);
      url = (await app({ BUYER_AUTH: `hs256:${SECRET}` }, prefix)).url;
    });
    const sold = async () => {
      const k = keys.product('phone');
      return {
        stock: await client.get(k.stock),
        orders: await client.xlen(k.orders),
        buyers: await client.hgetall(k.buyers),
      };
    };

    it("scopes an Idempotency-Key to the token's buyer: a key another buyer took first is still this buyer's", async () => {
      const as = async (sub: string) => ({ authorization: `Bearer ${await token(sub)}` });
      const put = await request(url, 'PUT', '/api/products/keyed', {
        json: { stock: 5, discardOrders: true },
        admin: true,
      });
      expect(put.status).toBe(200);
      const buyAs = async (sub: string) =>
        request(url, 'POST', '/api/orders', {
          json: { productId: 'keyed', userId: sub },
          headers: { ...(await as(sub)), 'idempotency-key': 'order-2026-alice-1' },
        });
      const mallory = await buyAs('mallory');
      expect(mallory.status).toBe(201);
      const alice = await buyAs('alice');
      expect(alice.status).toBe(201);
      expect(alice.body.orderId).not.toBe(mallory.body.orderId);
      // Each buyer's retry is answered their own order.
      const again = await buyAs('alice');
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.body.orderId).toBe(alice.body.orderId);
      expect(await client.xlen(keys.product('keyed').orders)).toBe(2);
    });

    it("reads and cancels an order only for the token's buyer: another buyer's is no order of theirs, nothing changed", async () => {
      const as = async (sub: string) => ({ authorization: `Bearer ${await token(sub)}` });
      const put = await request(url, 'PUT', '/api/products/owned', {
        json: { stock: 1, discardOrders: true },
        admin: true,
      });
      expect(put.status).toBe(200);
      const bought = await request(url, 'POST', '/api/orders', {
        json: { productId: 'owned', userId: 'frank' },
        headers: await as('frank'),
      });
      expect(bought.status).toBe(201);
      const path = `/api/orders/${bought.body.orderId as string}`;
      expect((await request(url, 'GET', path)).body).toMatchObject({ statusCode: 401, code: 'BUYER_TOKEN_REQUIRED' });
      expect((await request(url, 'GET', path, { headers: await as('mallory') })).body).toMatchObject({
        statusCode: 404,
        code: 'UNKNOWN_ORDER',
      });
      const stolen = await request(url, 'POST', `${path}/cancel`, { headers: await as('mallory') });
      expect(stolen.body).toMatchObject({ statusCode: 404, code: 'UNKNOWN_ORDER' });
      expect(await client.get(keys.product('owned').stock)).toBe('0');
      expect((await request(url, 'GET', path, { headers: await as('frank') })).body).toMatchObject({
        userId: 'frank',
        status: 'reserved',
      });
      const own = await request(url, 'POST', `${path}/cancel`, { headers: await as('frank') });
      expect(own.body).toMatchObject({ userId: 'frank', status: 'cancelled' });
      expect(await client.get(keys.product('owned').stock)).toBe('1');
    });

    it("reads a waiting-room ticket only for the token's buyer: another buyer's is no ticket of theirs", async () => {
      const put = await request(url, 'PUT', '/api/products/queued', {
        json: { stock: 2, queue: { admitPerSecond: 10 }, discardOrders: true },
        admin: true,
      });
      expect(put.status).toBe(200);
      const as = async (sub: string) => ({ authorization: `Bearer ${await token(sub)}` });
      const joined = await request(url, 'POST', '/api/products/queued/queue', {
        json: { userId: 'alice' },
        headers: await as('alice'),
      });
      expect(joined.status).toBe(202);
      const path = `/api/products/queued/queue/${joined.body.ticket as string}`;
      const own = await request(url, 'GET', path, { headers: await as('alice') });
      expect(own.body).toMatchObject({ state: 'admitted', pass: joined.body.pass });
      const other = await request(url, 'GET', path, { headers: await as('mallory') });
      expect(other.body).toMatchObject({ statusCode: 404, code: 'UNKNOWN_TICKET' });
      expect(other.body).not.toHaveProperty('pass');
      // Joining as someone else than the token's buyer is refused before anything is written.
      const posing = await request(url, 'POST', '/api/products/queued/queue', {
        json: { userId: 'alice' },
        headers: await as('mallory'),
      });
      expect(posing.body).toMatchObject({ statusCode: 403, code: 'USER_MISMATCH' });
    });

    it("buys as the token's sub", async () => {
      const res = await buy(url, 'alice', await token('alice'));
      expect(res.status).toBe(201);
      expect(res.body).toMatchObject({ userId: 'alice', quantity: 1 });
      expect(await client.hget(keys.product('phone').buyers, 'alice')).toBe('1');
    });

    it('refuses a body userId that is not the sub: 403 USER_MISMATCH, nothing written', async () => {
      const before = await sold();
      const res = await buy(url, 'bob', await token('mallory'));
      expect(res.status).toBe(403);
      expect(res.body).toMatchObject({ statusCode: 403, code: 'USER_MISMATCH' });
      expect(await sold()).toEqual(before);
    });

    it('refuses a missing, expired, foreign or unsigned token with a 401 of its own, nothing written', async () => {
      const before = await sold();
      const missing = await buy(url, 'carol');
      expect(missing.status).toBe(401);
      expect(missing.body.code).toBe('BUYER_TOKEN_REQUIRED');
      expect(missing.headers.get('www-authenticate')).toBe('Bearer realm="buyers"');
      const notBearer = await request(url, 'POST', '/api/orders', {
        json: { productId: 'phone', userId: 'carol' },
        headers: { authorization: `Basic ${Buffer.from('carol:pw').toString('base64')}` },
      });
      expect(notBearer.body.code).toBe('BUYER_TOKEN_REQUIRED');

      const expired = await buy(url, 'carol', await token('carol', { exp: Math.floor(Date.now() / 1000) - 60 }));
      expect(expired.status).toBe(401);
      expect(expired.body.code).toBe('BUYER_TOKEN_EXPIRED');
      expect(expired.headers.get('www-authenticate')).toMatch(/error="invalid_token"/);

      const invalid = async (bearer: string, reason: RegExp) => {
        const res = await buy(url, 'carol', bearer);
        expect({ status: res.status, code: res.body.code }).toEqual({ status: 401, code: 'BUYER_TOKEN_INVALID' });
        expect(res.body.message).toMatch(reason);
      };
      await invalid(await token('carol', { iss: 'https://evil.example/' }), /"iss" claim/);
      await invalid(await token('carol', { aud: 'another-service' }), /"aud" claim/);
      await invalid(await token('carol', { exp: null }), /"exp"/);
      // Another algorithm with the same secret, and no signature at all: only HS256 is allowed.
      const hs512 = await new SignJWT({})
        .setProtectedHeader({ alg: 'HS512' })
        .setSubject('carol')
        .setIssuer(ISSUER)
        .setAudience(AUDIENCE)
        .setExpirationTime('5m')
        .sign(HMAC);
      await invalid(hs512, /"alg" \(Algorithm\) Header Parameter value not allowed/);
      const unsigned = new UnsecuredJWT({}).setSubject('carol').setIssuer(ISSUER).setAudience(AUDIENCE).encode();
      await invalid(unsigned, /./);
      await invalid(`${(await token('carol')).slice(0, -4)}AAAA`, /signature verification failed/);
      await invalid(await token('not a user id'), /"sub" is not a user id/);
      expect(await sold()).toEqual(before);
    });

    it('takes a token it verified before without verifying again, and still refuses it once its exp passes', async () => {
      // Expires within the second; with the 5 s clock tolerance it is refused about 6 s on.
      const exp = Math.floor(Date.now() / 1000) + 1;
      const soon = await token('lena', { exp });
      expect((await buy(url, 'lena', soon)).status).toBe(201);
      // The second is let in by the cache of verified tokens (perUserLimit is 2).
      expect((await buy(url, 'lena', soon)).status).toBe(201);
      await new Promise((resolve) => setTimeout(resolve, (exp + 5) * 1000 - Date.now() + 50));
      const late = await buy(url, 'lena', soon);
      expect({ status: late.status, code: late.body.code }).toEqual({ status: 401, code: 'BUYER_TOKEN_EXPIRED' });
    }, 15_000);

    it('refuses at the door, before the body is parsed: no token and broken JSON is 401, not 400', async () => {
      const res = await buy(url, 'dave', undefined, '{"productId": ');
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('BUYER_TOKEN_REQUIRED');
      // With a good token the same body is parsed, and refused for what it is.
      expect((await buy(url, 'dave', await token('dave'), '{"productId": ')).status).toBe(400);
    });

    it('leaves the routes that are not the door alone', async () => {
      expect((await request(url, 'GET', '/api/products/phone')).status).toBe(200);
      expect((await request(url, 'GET', '/health')).status).toBe(200);
    });
  });

  it("limits the token's buyer with RATE_LIMIT_PER_USER before the body is read", async () => {
    const prefix = uniquePrefix('peruser');
    const { url } = await app({ BUYER_AUTH: `hs256:${SECRET}`, RATE_LIMIT_PER_USER: '1/60s' }, prefix);
    const erin = await token('erin');
    expect((await buy(url, 'erin', erin)).status).toBe(201);
    const refused = await buy(url, 'erin', erin, '{"productId": ');
    expect(refused.status).toBe(429);
    expect(refused.headers.get('ratelimit-policy')).toBe('"user";q=1;w=60');
    expect(await client.exists(`${prefix}rate:user:erin`)).toBe(1);
    // Another buyer from the same address is not limited by erin's count.
    expect((await buy(url, 'frank', await token('frank'))).status).toBe(201);
  });

  it('verifies with an SPKI public key, pinned to its one algorithm (no HS256 with the public key as secret)', async () => {
    const pair = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const pem = pair.publicKey.export({ type: 'spki', format: 'pem' }).toString();
    writeFileSync(join(dir, 'buyers.pem'), pem);
    const { url } = await app({ BUYER_AUTH: `spki-file:${join(dir, 'buyers.pem')}` });
    const es256 = await new SignJWT({})
      .setProtectedHeader({ alg: 'ES256' })
      .setSubject('gina')
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setExpirationTime('5m')
      .sign(pair.privateKey);
    expect((await buy(url, 'gina', es256)).status).toBe(201);
    // The classic confusion: an HMAC keyed with the (public) PEM.
    const confused = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject('gina')
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode(pem));
    const res = await buy(url, 'gina', confused);
    expect({ status: res.status, code: res.body.code }).toEqual({ status: 401, code: 'BUYER_TOKEN_INVALID' });
  });

  it('verifies with a JWKS file, choosing the key by kid', async () => {
    const [one, two] = await Promise.all([generateKeyPair('ES256'), generateKeyPair('RS256')]);
    const keys = [
      { ...(await exportJWK(one.publicKey)), kid: 'ec-1', alg: 'ES256' },
      { ...(await exportJWK(two.publicKey)), kid: 'rsa-1', alg: 'RS256' },
    ];
    writeFileSync(join(dir, 'jwks.json'), JSON.stringify({ keys }));
    const { url } = await app({ BUYER_AUTH: `jwks-file:${join(dir, 'jwks.json')}` });
    const sign = (alg: string, kid: string, key: typeof one.privateKey, sub: string) =>
      new SignJWT({})
        .setProtectedHeader({ alg, kid })
        .setSubject(sub)
        .setIssuer(ISSUER)
        .setAudience(AUDIENCE)
        .setExpirationTime('5m')
        .sign(key);
    expect((await buy(url, 'ivan', await sign('ES256', 'ec-1', one.privateKey, 'ivan'))).status).toBe(201);
    expect((await buy(url, 'judy', await sign('RS256', 'rsa-1', two.privateKey, 'judy'))).status).toBe(201);
    // Signed by the RSA key but naming the EC one: no key of the set verifies it.
    const crossed = await buy(url, 'kate', await sign('RS256', 'ec-1', two.privateKey, 'kate'));
    expect({ status: crossed.status, code: crossed.body.code }).toEqual({ status: 401, code: 'BUYER_TOKEN_INVALID' });
  });

  describe('with a JWKS URL', () => {
    let server: Server;
    let serving: 'keys' | 'error' = 'keys';
    let jwks: { keys: unknown[] };
    let privateKey: Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];
    beforeAll(async () => {
      const pair = await generateKeyPair('ES256');
      privateKey = pair.privateKey;
      jwks = { keys: [{ ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' }] };
      server = createServer((_req, res) => {
        if (serving === 'error') {
          res.writeHead(500).end();
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(jwks));
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    });
    afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const signed = (sub: string, kid: string) =>
      new SignJWT({})
        .setProtectedHeader({ alg: 'ES256', kid })
        .setSubject(sub)
        .setIssuer(ISSUER)
        .setAudience(AUDIENCE)
        .setExpirationTime('5m')
        .sign(privateKey);

    it('buys with a token whose kid the set holds; an identity provider that fails is 503 BUYER_KEYS_UNAVAILABLE', async () => {
      const { port } = server.address() as AddressInfo;
      serving = 'error';
      const down = await app({ BUYER_AUTH: `jwks:http://127.0.0.1:${port}/jwks.json` });
      const unavailable = await buy(down.url, 'hana', await signed('hana', 'k1'));
      expect({ status: unavailable.status, code: unavailable.body.code }).toEqual({
        status: 503,
        code: 'BUYER_KEYS_UNAVAILABLE',
      });
      expect(unavailable.headers.get('retry-after')).toBe('1');

      serving = 'keys';
      const up = await app({ BUYER_AUTH: `jwks:http://127.0.0.1:${port}/jwks.json` });
      expect((await buy(up.url, 'hana', await signed('hana', 'k1'))).status).toBe(201);
      const unknownKid = await buy(up.url, 'hana', await signed('hana', 'k2'));
      expect({ status: unknownKid.status, code: unknownKid.body.code }).toEqual({
        status: 401,
        code: 'BUYER_TOKEN_INVALID',
      });
    });
  });
});
