import { exportSPKI, generateKeyPair, SignJWT } from 'jose';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BenchAuth, BenchOptions } from './options';
import type { TargetBuyerAuth } from './target-options';

const ISSUER = 'seckill-bench';
const AUDIENCE = 'seckill';

/** The app's BUYER_AUTH settings for a row, and one token per buyer (by userId). */
export interface BuyerTokens {
  readonly env: Readonly<Record<string, string>>;
  readonly tokens: ReadonlyMap<string, string>;
}

/** Buyers that need a token: the warm-up's and the measured pass's are both b0, b1, ... */
export function tokenCount(options: Pick<BenchOptions, 'buyers' | 'warmup'>): number {
  return Math.max(options.buyers, options.warmup);
}

/**
 * A fresh key for the row (an HS256 secret, or a P-256 key pair whose public half the
 * app is given as a PEM file) and a token per buyer `b<i>`, as an identity provider
 * would issue them: sub, iss, aud, an hour's exp. Minted by the bench before the load.
 */
export async function mintBuyerTokens(auth: Exclude<BenchAuth, 'off'>, count: number): Promise<BuyerTokens> {
  let env: Record<string, string>;
  let sign: (jwt: SignJWT) => Promise<string>;
  if (auth === 'hs256') {
    const secret = randomBytes(32).toString('base64url');
    const key = new TextEncoder().encode(secret);
    env = { BUYER_AUTH: `hs256:${secret}` };
    sign = (jwt) => jwt.setProtectedHeader({ alg: 'HS256' }).sign(key);
  } else {
    const { publicKey, privateKey } = await generateKeyPair('ES256');
    const dir = mkdtempSync(join(tmpdir(), 'seckill-bench-auth-'));
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    const pem = join(dir, 'buyers.pem');
    writeFileSync(pem, await exportSPKI(publicKey));
    env = { BUYER_AUTH: `spki-file:${pem}` };
    sign = (jwt) => jwt.setProtectedHeader({ alg: 'ES256' }).sign(privateKey);
  }
  const tokens = await mint(sign, { issuer: ISSUER, audience: AUDIENCE }, count);
  return { env: { ...env, BUYER_AUTH_ISSUER: ISSUER, BUYER_AUTH_AUDIENCE: AUDIENCE }, tokens };
}

/**
 * --target --auth hs256: a token per buyer `b<i>` minted with the deployment's own
 * BUYER_AUTH secret, issuer and audience (the user gives them: bench/target-options.ts).
 */
export function mintDeploymentTokens(key: TargetBuyerAuth, count: number): Promise<ReadonlyMap<string, string>> {
  const secret = new TextEncoder().encode(key.secret);
  return mint((jwt) => jwt.setProtectedHeader({ alg: 'HS256' }).sign(secret), key, count);
}

async function mint(
  sign: (jwt: SignJWT) => Promise<string>,
  claims: { issuer: string; audience: string },
  count: number,
): Promise<Map<string, string>> {
  const tokens = new Map<string, string>();
  for (let i = 0; i < count; i++) {
    const userId = `b${i}`;
    const jwt = new SignJWT({}).setSubject(userId).setIssuer(claims.issuer).setAudience(claims.audience);
    tokens.set(userId, await sign(jwt.setExpirationTime('1h')));
  }
  return tokens;
}
