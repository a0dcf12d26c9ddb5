import {
  AppError,
  BadRequestError,
  ContentionError,
  FRAMEWORK_ERRORS,
  IdempotencyKeyInUseError,
  IdempotencyKeyMismatchError,
  InsufficientStockError,
  InternalError,
  LimitReachedError,
  LockExpiredError,
  LockNodesUnavailableError,
  LockTimeoutError,
  OutcomeUnknownError,
  RedisUnavailableError,
  SoldOutError,
  StaleLockError,
  TooManyWatchersError,
  UnauthorizedError,
  UnknownProductError,
  ValidationFailedError,
} from '../errors/errors';

/**
 * One answer per code, made by the code's own class, so each example's message is the
 * one errors.ts writes. The framework's codes carry the text Fastify gives them.
 */
const EXAMPLES: readonly AppError[] = [
  new ValidationFailedError('quantity must not be greater than 100', [
    { field: 'quantity', messages: ['quantity must not be greater than 100'] },
  ]),
  new BadRequestError('the request is not valid HTTP'),
  new UnauthorizedError(),
  new FRAMEWORK_ERRORS[404]('Cannot GET /docs/nothing.js'),
  new FRAMEWORK_ERRORS[408]('the request did not arrive in time'),
  new FRAMEWORK_ERRORS[413]('Request body is too large'),
  new FRAMEWORK_ERRORS[414]("'/api/products/xxxx...' is exceeding the max param length"),
  new FRAMEWORK_ERRORS[415]('Unsupported Media Type'),
  new FRAMEWORK_ERRORS[431]('the request headers are too large'),
  new IdempotencyKeyInUseError(2000),
  new IdempotencyKeyMismatchError(),
  new UnknownProductError('phone'),
  new SoldOutError('phone'),
  new InsufficientStockError('phone', 1, 2),
  new LimitReachedError('user1', 1, 1, 1),
  new LockTimeoutError(2000),
  new LockExpiredError(9990),
  new StaleLockError(41, 42),
  new ContentionError(8, 2000),
  new LockNodesUnavailableError(2, 3, 2),
  new TooManyWatchersError('this instance already holds 256 live streams'),
  new RedisUnavailableError(),
  new OutcomeUnknownError(),
  new InternalError(),
];

/** The example answer of each code in errors.ts. */
export const ERROR_EXAMPLES: ReadonlyMap<string, AppError> = new Map(EXAMPLES.map((error) => [error.code, error]));
