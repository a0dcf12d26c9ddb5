import { isDoorRoute } from './door-routes';

describe('isDoorRoute', () => {
  it('covers the purchase, queue-join and ticket routes, whatever their parameters are named', () => {
    expect(isDoorRoute('POST', '/api/orders')).toBe(true);
    expect(isDoorRoute('POST', '/api/products/:id/orders')).toBe(true);
    expect(isDoorRoute('POST', '/api/products/:productId/orders')).toBe(true);
    expect(isDoorRoute('POST', '/api/products/:id/queue')).toBe(true);
    expect(isDoorRoute('GET', '/api/products/:id/queue/:ticket')).toBe(true);
    expect(isDoorRoute('HEAD', '/api/products/:id/queue/:ticket')).toBe(true);
  });

  it('leaves the admin route, the reads, the order outcomes, the probes, metrics and the dashboard alone', () => {
    for (const [method, url] of [
      ['PUT', '/api/products/:id'],
      ['GET', '/api/products/:id'],
      ['GET', '/api/orders/:orderId'],
      ['POST', '/api/orders/:orderId/pay'],
      ['POST', '/api/orders/:orderId/cancel'],
      ['GET', '/api/orders'],
      ['GET', '/health'],
      ['GET', '/metrics'],
      ['GET', '/'],
      ['GET', '/api/live/:productId'],
    ]) {
      expect({ method, url, door: isDoorRoute(method, url) }).toEqual({ method, url, door: false });
    }
  });
});
