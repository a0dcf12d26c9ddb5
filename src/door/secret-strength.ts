import { ZxcvbnFactory } from '@zxcvbn-ts/core';
import * as common from '@zxcvbn-ts/language-common';

/**
 * Example values that documentation, compose files and tutorials show for a token:
 * long enough to pass a length check, and known to anyone who read the same page.
 * Compared with letters and digits only, case folded (`Change_Me` is `changeme`).
 */
const EXAMPLE_TOKEN_WORDS = [
  'changeme',
  'example',
  'placeholder',
  'yoursecret',
  'yourtoken',
  'replaceme',
  'secret',
  'password',
];

/**
 * The fewest guesses an attacker should need for a secret, as a power of ten (10^19,
 * about 63 bits), by zxcvbn's estimate (@zxcvbn-ts): it knows keyboard rows, sequences
 * (`abcdefghijklmnop`, `0123456789...`), repeats, dates, l33t and common words and
 * passwords, which a count of distinct characters does not. A random 24-byte token
 * (`openssl rand -base64 24`, what `npm start` generates) is at its cap.
 */
export const MIN_SECRET_GUESSES_LOG10 = 19;

let strength: ZxcvbnFactory | undefined;
/** log10 of the guesses zxcvbn estimates `token` needs (its matchers built once, on first use). */
export function tokenGuessesLog10(token: string): number {
  strength ??= new ZxcvbnFactory({ dictionary: { ...common.dictionary }, graphs: common.adjacencyGraphs });
  return strength.check(token).guessesLog10;
}

/** How a secret's variable says what is wrong with it: its bound, and what to do instead. */
export interface SecretRule {
  readonly min: number;
  /** The line for a secret shorter than `min` (or unset, where one is required). */
  readonly short: string;
  /** Said before what is wrong (`hs256: the secret `). */
  readonly prefix?: string;
  /** Said after an example value: why it matters. */
  readonly example?: string;
  /** Said after the guesses needed. */
  readonly guesses?: string;
  readonly advice: string;
}

/** A key that signs or verifies (HS256, a webhook's HMAC): at least the hash's 256 bits (RFC 7518 3.2). */
export const SECRET_256 = {
  min: 32,
  short: 'must be at least 32 characters (256 bits); use `openssl rand -base64 32`',
  advice: 'use `openssl rand -base64 32`',
} as const;

/**
 * The one rule for ADMIN_TOKEN, BUYER_AUTH's hs256 key and PAYMENT_WEBHOOK_SECRET: long
 * enough, no example value, and at least MIN_SECRET_GUESSES_LOG10 by zxcvbn's estimate.
 * What is wrong, in the variable's words, or null.
 */
export function secretProblem(secret: string, rule: SecretRule): string | null {
  const prefix = rule.prefix ?? '';
  if (secret.length < rule.min) return rule.short;
  const folded = secret.toLowerCase().replace(/[^a-z0-9]/g, '');
  const word = EXAMPLE_TOKEN_WORDS.find((w) => folded.includes(w));
  if (word) return `${prefix}looks like an example value (it contains "${word}")${rule.example ?? ''}; ${rule.advice}`;
  const guesses = tokenGuessesLog10(secret);
  if (guesses < MIN_SECRET_GUESSES_LOG10) {
    const needed = `at least 10^${MIN_SECRET_GUESSES_LOG10} needed${rule.guesses ?? ''}`;
    return `${prefix}is too easy to guess (about 10^${Math.floor(guesses)} guesses by zxcvbn's estimate, ${needed}); ${rule.advice}`;
  }
  return null;
}
