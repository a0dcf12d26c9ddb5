import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { AppConfig, loadConfig } from '../../src/config/app-config';
import { createApp } from '../../src/create-app';

export const ADMIN_TOKEN = 'test-admin-token-0123456789';

export interface TestApp {
  readonly app: NestFastifyApplication;
  readonly url: string;
  readonly config: AppConfig;
  close(): Promise<void>;
}

/**
 * The real app (Fastify, pipes, filters, Redis client) listening on a free port.
 * `env` is read by the same loader as production, so tests also prove the config.
 */
export async function startTestApp(env: Record<string, string>): Promise<TestApp> {
  const config = loadConfig({ ADMIN_TOKEN, LOG_LEVEL: 'error', ...env });
  const app = await createApp(config, { logger: false });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  await waitForHealth(url);
  return { app, url, config, close: () => app.close() };
}

/** The Redis client connects in the background; wait until /health says it is up. */
export async function waitForHealth(url: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const status = await fetch(`${url}/health`).then((r) => r.status, () => 0);
    if (status === 200) return;
    if (Date.now() > deadline) throw new Error(`${url}/health did not answer 200 within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export interface JsonResponse<T = Record<string, unknown>> {
  status: number;
  headers: Headers;
  body: T;
}

/** fetch with a JSON body (unless `raw` is given) and a parsed JSON answer. */
export async function request<T = Record<string, any>>(
  url: string,
  method: string,
  path: string,
  options: { json?: unknown; raw?: string; headers?: Record<string, string>; admin?: boolean } = {},
): Promise<JsonResponse<T>> {
  const headers: Record<string, string> = { ...options.headers };
  let body: string | undefined;
  if (options.json !== undefined) {
    headers['content-type'] ??= 'application/json';
    body = JSON.stringify(options.json);
  } else if (options.raw !== undefined) {
    body = options.raw;
  }
  if (options.admin) headers.authorization = `Bearer ${ADMIN_TOKEN}`;
  const res = await fetch(`${url}${path}`, { method, headers, body });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

/** Starts (or restarts) a sale through the admin API and asserts it worked. */
export async function startSale(url: string, productId: string, stock: number, perUserLimit = 1): Promise<void> {
  const res = await request(url, 'PUT', `/api/products/${productId}`, { json: { stock, perUserLimit }, admin: true });
  if (res.status !== 200) throw new Error(`sale setup failed: ${res.status} ${JSON.stringify(res.body)}`);
}
