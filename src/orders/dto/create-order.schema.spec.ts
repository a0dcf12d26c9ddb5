import { acknowledge } from '../order';
import { CREATE_ORDER_ROUTE_SCHEMA } from './create-order.schema';

describe('CREATE_ORDER_ROUTE_SCHEMA', () => {
  // The 201 serializer writes only what the schema lists, in its order: a field added to
  // Order would be dropped from every answer without a word.
  it("lists every field acknowledge() writes, in acknowledge()'s order", () => {
    const order = acknowledge({ productId: 'p', userId: 'u', quantity: 1 }, 'id', 0);
    const schema = CREATE_ORDER_ROUTE_SCHEMA.response[201];
    expect(Object.keys(schema.properties)).toEqual(Object.keys(order));
    expect([...schema.required]).toEqual(Object.keys(order));
  });
});
