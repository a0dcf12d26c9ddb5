/**
 * Every error the API answers with, each declared once: its code, its HTTP status and
 * its message (fastify's lib/errors.js: `createError(code, message, status)`). One
 * code, one meaning. Services throw these classes and nothing HTTP-shaped, so the
 * bench, tests and a CLI can reuse them; ErrorFilter only reads `status` and `code`.
 */
// Each section registers its codes as it loads, so the table (ERROR_CODES) keeps this order;
// the rest of src/ imports it from here only (eslint.config.mjs: NOT_ERROR_SECTIONS).
export { AppError, ERROR_CODES, retryAfterSeconds, saidOf } from './app-error';
export type { ErrorDeclaration } from './app-error';
export * from './request-errors';
export * from './sale-errors';
export * from './retry-errors';
