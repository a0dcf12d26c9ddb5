import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import * as http from '../../harness/http';
import { AppConfig, loadConfig } from '../../src/config/app-config';
import { createApp } from '../../src/create-app';

export { waitForHealth } from '../../harness/http';
export type { JsonResponse } from '../../harness/http';

export const ADMIN_TOKEN = 'seckill-test-token-5b3e9a1c7f2d';

/** The test apps' PAYMENT_WEBHOOK_SECRET: a payment is the provider's signed callback (pay()). */
export const PAYMENT_SECRET = 'Tq7vN2xK9pLw4Rb8Zc1Hm6Yd3Fs5Gj0U';

export interface TestApp {
  readonly app: NestFastifyApplication;
  readonly url: string;
  readonly config: AppConfig;
  close(): Promise<void>;
}

/**
 * The real app (Fastify, pipes, filters, Redis client) in this process, listening
 * on a free port. `env` is read by the same loader as production, so tests also
 * prove the config.
 */
export async function startTestApp(env: Record<string, string>): Promise<TestApp> {
  const config = loadConfig({ ADMIN_TOKEN, PAYMENT_WEBHOOK_SECRET: PAYMENT_SECRET, LOG_LEVEL: 'error', ...env });
  const app = await createApp(config, { logger: false });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  await http.waitForHealth(url);
  return { app, url, config, close: () => app.close() };
}

/** harness/http.ts's request, with `admin: true` for the test token. */
export function request<T = Record<string, any>>(
  url: string,
  method: string,
  path: string,
  options: { json?: unknown; raw?: string; headers?: Record<string, string>; admin?: boolean } = {},
): Promise<http.JsonResponse<T>> {
  const { admin, ...rest } = options;
  return http.request<T>(url, method, path, { ...rest, ...(admin ? { token: ADMIN_TOKEN } : {}) });
}

/** Pays an order as the payment provider does: the callback signed with the test apps' secret. */
export function pay(url: string, orderId: string, paymentId: string): Promise<http.JsonResponse> {
  return http.pay(url, orderId, paymentId, PAYMENT_SECRET);
}

/** Starts (or restarts) a sale through the admin API, with the test token. */
export function startSale(url: string, productId: string, stock: number, perUserLimit = 1): Promise<void> {
  return http.startSale(url, ADMIN_TOKEN, productId, stock, perUserLimit);
}
