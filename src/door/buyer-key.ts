import { createPublicKey, type JsonWebKeyInput } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ConfigError } from '../settings/setting';
import { SECRET_256, secretProblem } from './secret-strength';

/** The JWS algorithms a buyer token may be signed with when the key is a JWKS: asymmetric only, never `none` or HMAC. */
export const JWKS_ALGORITHMS = ['RS256', 'PS256', 'ES256', 'ES384', 'EdDSA', 'Ed25519'] as const;

/**
 * Where the key that verifies buyer tokens comes from, and the one algorithm (or, for a
 * JWKS, the asymmetric algorithms) it is used with: a token's `alg` header never
 * chooses the algorithm by itself (the RFC 8725 `alg` confusion).
 */
export type BuyerKey =
  | { readonly kind: 'hs256'; readonly secret: string }
  | { readonly kind: 'spki'; readonly pem: string; readonly algorithm: 'RS256' | 'ES256' | 'ES384' | 'EdDSA' }
  | { readonly kind: 'jwks'; readonly jwks: { readonly keys: readonly Record<string, unknown>[] } }
  | { readonly kind: 'jwks-url'; readonly url: string };

export interface BuyerAuthConfig {
  readonly key: BuyerKey;
  /** BUYER_AUTH_ISSUER: the `iss` every token must carry. */
  readonly issuer: string;
  /** BUYER_AUTH_AUDIENCE: the `aud` every token must name (this service). */
  readonly audience: string;
}

/** BUYER_AUTH (+ _ISSUER, _AUDIENCE): who may buy as whom; null: the body's userId is taken on trust. */
export function buyerAuth(
  value: string | undefined,
  issuer: string | undefined,
  audience: string | undefined,
): BuyerAuthConfig | null {
  if (value === undefined) {
    // A half-configured check is worse than none: the operator thinks tokens are checked.
    const stray = issuer !== undefined ? 'BUYER_AUTH_ISSUER' : audience !== undefined ? 'BUYER_AUTH_AUDIENCE' : null;
    if (stray) throw new ConfigError(stray, 'is set but BUYER_AUTH is not: set BUYER_AUTH too, or unset it');
    return null;
  }
  if (issuer === undefined) {
    throw new ConfigError('BUYER_AUTH_ISSUER', 'is required with BUYER_AUTH: the `iss` your token issuer writes');
  }
  if (audience === undefined) {
    throw new ConfigError(
      'BUYER_AUTH_AUDIENCE',
      'is required with BUYER_AUTH: the `aud` your tokens name this service by',
    );
  }
  return { key: buyerKey(value), issuer, audience };
}

const BUYER_AUTH_FORMS =
  'jwks:<https URL>, jwks-file:<path>, spki-file:<path to a PEM public key> or hs256:<secret of 32+ characters>';

function buyerKey(value: string): BuyerKey {
  const name = 'BUYER_AUTH';
  const colon = value.indexOf(':');
  const kind = colon < 0 ? '' : value.slice(0, colon);
  const rest = colon < 0 ? '' : value.slice(colon + 1);
  if (kind === 'hs256') {
    // RFC 7518 3.2: an HS256 key is at least as long as the hash, 256 bits. Whoever
    // guesses it mints a token for any `sub` and buys as anyone: as hard to guess as the
    // admin token at least, and never an example value.
    const problem = secretProblem(rest, {
      ...SECRET_256,
      prefix: 'hs256: the secret ',
      short: 'hs256: the secret must be at least 32 characters (256 bits)',
    });
    if (problem) throw new ConfigError(name, problem);
    return { kind, secret: rest };
  }
  if (kind === 'jwks') {
    let url: URL;
    try {
      url = new URL(rest);
    } catch {
      throw new ConfigError(name, `jwks: "${rest}" is not a URL`);
    }
    // Keys fetched in the clear can be swapped by anyone on the path; loopback is a sidecar or a test.
    const loopback = ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);
    if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopback)) {
      throw new ConfigError(name, `jwks: the URL must be https:// (http:// only on loopback), got "${rest}"`);
    }
    return { kind: 'jwks-url', url: url.href };
  }
  if (kind === 'jwks-file' || kind === 'spki-file') {
    let text: string;
    try {
      text = readFileSync(rest, 'utf8');
    } catch (err) {
      throw new ConfigError(name, `${kind}: cannot read "${rest}": ${(err as Error).message}`);
    }
    return kind === 'jwks-file' ? jwksFile(rest, text) : spkiFile(rest, text);
  }
  throw new ConfigError(name, `must be one of ${BUYER_AUTH_FORMS}; got "${kind || value.slice(0, 20)}..."`);
}

function jwksFile(path: string, text: string): BuyerKey {
  let jwks: unknown;
  try {
    jwks = JSON.parse(text);
  } catch {
    throw new ConfigError('BUYER_AUTH', `jwks-file: "${path}" is not JSON`);
  }
  const keys = (jwks as { keys?: unknown })?.keys;
  if (!Array.isArray(keys) || keys.length === 0 || keys.some((k) => typeof k !== 'object' || k === null)) {
    throw new ConfigError(
      'BUYER_AUTH',
      `jwks-file: "${path}" must be a JWK Set, {"keys": [...]}, with at least one key`,
    );
  }
  // A private or symmetric key in a file of public keys is a leak waiting to be served.
  if (keys.some((k: Record<string, unknown>) => k.kty === 'oct' || 'd' in k)) {
    throw new ConfigError('BUYER_AUTH', `jwks-file: "${path}" holds a private or symmetric key: give public keys only`);
  }
  // Each key imported now, so a key that cannot verify (malformed, RSA under 2048 bits)
  // stops the app at boot, not every buyer at sale time.
  for (const [i, k] of keys.entries()) {
    let imported: ReturnType<typeof createPublicKey>;
    try {
      imported = createPublicKey({ key: k as JsonWebKeyInput['key'], format: 'jwk' });
    } catch (err) {
      throw new ConfigError(
        'BUYER_AUTH',
        `jwks-file: "${path}" key ${i} is not a usable public key: ${(err as Error).message}`,
      );
    }
    strongEnough(imported, `jwks-file: "${path}" key ${i}`);
  }
  return { kind: 'jwks', jwks: { keys } };
}

/** RS256 needs 2048 bits (RFC 7518 3.3); jose refuses less at every verification, so refuse it at boot. */
function strongEnough(key: ReturnType<typeof createPublicKey>, what: string): void {
  const bits = key.asymmetricKeyDetails?.modulusLength;
  if (key.asymmetricKeyType === 'rsa' && (bits ?? 0) < 2048) {
    throw new ConfigError('BUYER_AUTH', `${what} is an RSA key of ${bits} bits: at least 2048 are needed`);
  }
}

function spkiFile(path: string, pem: string): BuyerKey {
  let key: ReturnType<typeof createPublicKey>;
  try {
    key = createPublicKey(pem);
  } catch {
    throw new ConfigError('BUYER_AUTH', `spki-file: "${path}" is not a PEM public key`);
  }
  if (!pem.includes('-----BEGIN PUBLIC KEY-----')) {
    throw new ConfigError('BUYER_AUTH', `spki-file: "${path}" must hold a public key (-----BEGIN PUBLIC KEY-----)`);
  }
  strongEnough(key, `spki-file: "${path}"`);
  const type = key.asymmetricKeyType;
  const curve = key.asymmetricKeyDetails?.namedCurve;
  // The key decides the one algorithm tokens may use.
  const algorithm =
    type === 'rsa'
      ? 'RS256'
      : type === 'ed25519'
        ? 'EdDSA'
        : type === 'ec' && curve === 'prime256v1'
          ? 'ES256'
          : type === 'ec' && curve === 'secp384r1'
            ? 'ES384'
            : undefined;
  if (!algorithm) {
    throw new ConfigError(
      'BUYER_AUTH',
      `spki-file: "${path}" is a ${type}${curve ? ` ${curve}` : ''} key; use RSA (RS256), EC P-256 (ES256), P-384 (ES384) or Ed25519 (EdDSA)`,
    );
  }
  return { kind: 'spki', pem, algorithm };
}
