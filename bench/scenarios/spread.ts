/** --target with several URLs: the measured pass spread over the deployment's instances (load.ts spreadLoad). */
import { spreadLoad } from '../load';
import type { Sale, Scenario } from './scenario';

export function spread({ t }: Sale): Scenario | undefined {
  const urls = t.urls;
  if (!urls || urls.length < 2) return undefined;
  return { load: (options, progress) => spreadLoad(options, urls, progress) };
}
