/** --target with several URLs: the measured pass spread over the deployment's instances (load.ts spreadLoad). */
import { loadAt } from '../load';
import type { Sale, Scenario } from './scenario';

export function spread({ run, t }: Sale): Scenario | undefined {
  // A waiting room's buyers and a window's waves are fired by their own kinds, spread as well.
  if (!t.urls || t.urls.length < 2 || t.queue || run.options.startsInMs !== undefined) return undefined;
  return { load: loadAt(t.urls) };
}
