/**
 * --retries N: every buyer told 503 retries with its Idempotency-Key after the pass
 * (bench/retries.ts), and the verdict judges the pass and the retries together.
 */
import type { Answer } from '../load';
import { retryFailed } from '../retries';
import type { Sale, Scenario } from './scenario';

export function retries({ run, t, productId }: Sale): Scenario | undefined {
  const { options } = run;
  if (options.retries === 0) return undefined;
  const answers: Answer[] = [];
  return {
    onAnswer: (a) => answers.push(a),
    async after(first) {
      const retried = await retryFailed(t.app.url, productId, options.quantity, answers, options.retries, first);
      const { buyers, sent, outcomes, replayed } = retried.summary;
      run.log(
        `${t.label}: --retries ${options.retries}: ${buyers} buyers told 503 retried with their key (${sent} requests): ` +
          `${
            Object.entries(outcomes)
              .map(([code, n]) => `${code} ×${n}`)
              .join(', ') || 'none'
          }; ${replayed} answered an order placed earlier`,
      );
      return retried.load;
    },
  };
}
