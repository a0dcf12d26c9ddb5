import { createLocalJWKSet, createRemoteJWKSet, errors, importSPKI, jwtVerify, type JWTVerifyOptions } from 'jose';
import type { JSONWebKeySet } from 'jose';
import { BuyerAuthConfig, JWKS_ALGORITHMS } from './buyer-key';
import {
  AppError,
  BuyerKeysUnavailableError,
  BuyerTokenExpiredError,
  BuyerTokenInvalidError,
  BuyerTokenRequiredError,
} from '../errors/errors';
import { ID_PATTERN, ID_RULE } from '../sale/sale-limits';
import { VerifiedTokens } from './verified-tokens';

/** Clocks of the issuer and of this app may disagree by this much on `exp` and `nbf`. */
const CLOCK_TOLERANCE_S = 5;
/** Verified tokens kept (about 0.5 KB each), and how long one is taken without a new check. */
const CACHED_TOKENS = 10_000;
const RECHECK_MS = 60_000;

type VerifyKey = Parameters<typeof jwtVerify>[1];

/**
 * Who the buyer is, with BUYER_AUTH: the `sub` of a JWT that the configured key
 * verifies (jose's jwtVerify), issued by BUYER_AUTH_ISSUER for BUYER_AUTH_AUDIENCE,
 * signed with the one algorithm the key allows, and carrying `exp`. Read from the
 * Authorization header only, so it is known before the body is.
 */
export class BuyerAuth {
  private constructor(
    private readonly key: VerifyKey,
    private readonly options: JWTVerifyOptions,
    /** The keys are fetched (BUYER_AUTH=jwks:<URL>): a failure to get them is ours, not the token's. */
    private readonly remote = false,
  ) {}

  private readonly verified = new VerifiedTokens(CACHED_TOKENS, RECHECK_MS);

  static async create(config: BuyerAuthConfig): Promise<BuyerAuth> {
    const options = {
      issuer: config.issuer,
      audience: config.audience,
      clockTolerance: CLOCK_TOLERANCE_S,
      // A token without an expiry would buy forever, one without a subject as no one.
      requiredClaims: ['sub', 'exp'],
    };
    const { key } = config;
    switch (key.kind) {
      case 'hs256':
        // Imported once: given the raw bytes, jose's Web Crypto build imports them again
        // on every verification.
        return new BuyerAuth(
          await crypto.subtle.importKey(
            'raw',
            new TextEncoder().encode(key.secret),
            { name: 'HMAC', hash: 'SHA-256' },
            false,
            ['verify'],
          ),
          { ...options, algorithms: ['HS256'] },
        );
      case 'spki':
        return new BuyerAuth(await importSPKI(key.pem, key.algorithm), { ...options, algorithms: [key.algorithm] });
      case 'jwks':
        return new BuyerAuth(createLocalJWKSet(key.jwks as JSONWebKeySet) as unknown as VerifyKey, {
          ...options,
          algorithms: [...JWKS_ALGORITHMS],
        });
      case 'jwks-url':
        // jose refetches on an unknown `kid` (at most every 30 s) and times a fetch out
        // after 5 s; the set is kept for a minute (jose's default is 10), so a key the
        // issuer withdraws stops verifying within a minute, as the token cache rechecks.
        return new BuyerAuth(
          createRemoteJWKSet(new URL(key.url), { cacheMaxAge: RECHECK_MS }) as unknown as VerifyKey,
          {
            ...options,
            algorithms: [...JWKS_ALGORITHMS],
          },
          true,
        );
    }
  }

  /** The buyer's id (the token's `sub`) from an Authorization header; throws the AppError to answer. */
  async buyerOf(authorization: string | undefined): Promise<string> {
    const token = /^Bearer +(\S+)$/i.exec(authorization ?? '')?.[1];
    if (token === undefined) throw new BuyerTokenRequiredError();
    const cached = this.verified.get(token);
    if (cached === 'expired') throw new BuyerTokenExpiredError();
    if (cached !== undefined) return cached;
    try {
      const { payload } = await jwtVerify(token, this.key as Parameters<typeof jwtVerify>[1], this.options);
      // The buyer's id is the body's userId too, so it follows the same rule.
      if (typeof payload.sub !== 'string' || !ID_PATTERN.test(payload.sub)) {
        throw new BuyerTokenInvalidError(`"sub" is not a user id: it ${ID_RULE}`);
      }
      // `exp` is required, so present: jwtVerify checked it with the same tolerance.
      this.verified.set(token, payload.sub, (payload.exp! + CLOCK_TOLERANCE_S) * 1_000);
      return payload.sub;
    } catch (err) {
      throw refusal(err, this.remote);
    }
  }
}

function refusal(err: unknown, remote: boolean): unknown {
  if (err instanceof AppError) return err;
  if (err instanceof errors.JWTExpired) return new BuyerTokenExpiredError();
  // Not the token's fault: the key set could not be fetched (a network error, a
  // timeout, an answer that is not 200 or not a JWK Set: jose's generic error).
  const unreachable =
    !(err instanceof errors.JOSEError) ||
    err instanceof errors.JWKSTimeout ||
    err instanceof errors.JWKSInvalid ||
    err.code === 'ERR_JOSE_GENERIC';
  // With local keys (checked at boot) an error here is the token's odd shape meeting
  // the key (jose's Web Crypto refusing it): refused, never a 500.
  if (unreachable)
    return remote
      ? new BuyerKeysUnavailableError()
      : new BuyerTokenInvalidError('could not be checked with the configured key');
  // jose's own words ('"aud" claim check failed', 'signature verification failed'):
  // they name the check, never the key.
  return new BuyerTokenInvalidError(err.message.slice(0, 120));
}
