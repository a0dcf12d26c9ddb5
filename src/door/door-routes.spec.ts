import { isDoorRoute } from './door-routes';

describe('isDoorRoute', () => {
  it('covers the purchase, queue-join and ticket routes, whatever their parameters are named', () => {
    expect(isDoorRoute('POST', '/api/orders')).toBe(true);
    expect(isDoorRoute('POST', '/api/products/:id/orders')).toBe(true);
    expect(isDoorRoute('POST', '/api/products/:productId/orders')).toBe(true);
    expect(isDoorRoute('POST', '/api/products/:id/queue')).toBe(true);
    expect(isDoorRoute('GET', '/api/products/:id/queue/:ticket')).toBe(true);
    expect(isDoorRoute('HEAD', '/api/products/:id/queue/:ticket')).toBe(true);
    // The buyer's own order: read and cancelled only by the token's buyer under BUYER_AUTH.
    expect(isDoorRoute('GET', '/api/orders/:orderId')).toBe(true);
    expect(isDoorRoute('POST', '/api/orders/:orderId/cancel')).toBe(true);
  });

  it("leaves the admin route, the product read, the payment provider's callback, the probes, metrics and the dashboard alone", () => {
    for (const [method, url] of [
      ['PUT', '/api/products/:id'],
      ['GET', '/api/products/:id'],
      ['POST', '/api/orders/:orderId/pay'],
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
