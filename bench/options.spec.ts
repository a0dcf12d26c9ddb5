import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseOptions, USAGE, UsageError } from './options';

describe('bench options', () => {
  it('sells one product on a private Redis server by default', () => {
    const options = parseOptions([]);
    expect(options.products).toBe(1);
    expect(options).not.toHaveProperty('cluster');
  });

  it('takes --starts-in MS for one product with stock, and refuses it elsewhere', () => {
    expect(parseOptions(['--starts-in', '3000'])).toMatchObject({ startsInMs: 3000 });
    expect(parseOptions([])).not.toHaveProperty('startsInMs');
    expect(() => parseOptions(['--starts-in', '3000', '--products', '2'])).toThrow(UsageError);
    expect(() => parseOptions(['--starts-in', '3000', '--sold-out-path'])).toThrow(UsageError);
    expect(() => parseOptions(['--starts-in', 'soon'])).toThrow(UsageError);
  });

  it('takes --target URL[,URL...] with its admin token and Redis: no strategy or settling database of its own, and refuses what the deployment decides', () => {
    const deployment = [
      '--target',
      'http://10.0.0.1:3000/,http://10.0.0.2:3000',
      '--admin-token',
      'T',
      '--redis',
      'redis://10.0.0.3:6379',
    ];
    expect(parseOptions(deployment)).toMatchObject({
      target: { urls: ['http://10.0.0.1:3000', 'http://10.0.0.2:3000'], adminToken: 'T', keyPrefix: 'seckill:' },
      strategies: [],
      settle: [],
    });
    expect(parseOptions([...deployment, '--database', 'postgres://u@db/x', '--key-prefix', 'shop:'])).toMatchObject({
      target: { database: 'postgres://u@db/x', keyPrefix: 'shop:' },
    });
    expect(() => parseOptions(['--target', 'http://a:1', '--redis', 'redis://b:2'])).toThrow(
      '--target needs --admin-token',
    );
    expect(() => parseOptions(['--target', 'http://a:1', '--admin-token', 'T'])).toThrow('--target needs --redis');
    expect(() => parseOptions([...deployment.slice(2), '--target', 'a:1'])).toThrow(
      '--target takes http(s)://host:port URLs, got "a:1"',
    );
    expect(() => parseOptions([...deployment, '--workers', '2', '--catalog=5', '--strategy', 'lock'])).toThrow(
      '--target runs against a deployment as it is: not with --strategy, --workers, --catalog',
    );
    // Over several URLs as over one: each spreads its buyers itself (bench/scenarios/spread.ts).
    expect(parseOptions([...deployment, '--queue', '100'])).toMatchObject({ queue: [100] });
    expect(parseOptions([...deployment, '--starts-in', '1000'])).toMatchObject({ startsInMs: 1000 });
    expect(() => parseOptions([...deployment, '--queue', '100', '--starts-in', '1000'])).toThrow(
      '--queue runs one product with stock, bought through its waiting room: not with --products, --sold-out-path, --pay, --retries or --starts-in',
    );
    // One row against a deployment: a second waiting room would be a row never run.
    expect(() => parseOptions([...deployment, '--queue', 'off,500'])).toThrow(
      '--queue with --target: the run is one row, on one waiting room; give off or RATE, not "off,500"',
    );
    // A deployment's settings without one: refused, not ignored.
    expect(() =>
      parseOptions(['--admin-token', 'T', '--database', 'postgres://u@db/x', '--key-prefix', 'shop:']),
    ).toThrow('--admin-token, --database, --key-prefix go with --target only');
  });

  it("takes --pay with --target (paid with its admin token), and --auth hs256 with the deployment's buyer secret and claims", () => {
    const deployment = ['--target', 'http://10.0.0.1:3000', '--admin-token', 'T', '--redis', 'redis://10.0.0.3:6379'];
    expect(parseOptions([...deployment, '--pay', '0.5', '--payment-timeout', '2000'])).toMatchObject({
      pay: 0.5,
      paymentTimeoutMs: 2000,
    });
    const claims = ['--buyer-secret', 'S', '--buyer-issuer', 'https://id', '--buyer-audience', 'shop'];
    expect(parseOptions([...deployment, '--auth', 'hs256', ...claims])).toMatchObject({
      auth: ['hs256'],
      target: { buyerAuth: { secret: 'S', issuer: 'https://id', audience: 'shop' } },
    });
    expect(parseOptions(deployment).target).not.toHaveProperty('buyerAuth');
    expect(() => parseOptions([...deployment, '--auth', 'hs256', ...claims.slice(0, 2)])).toThrow(
      "--auth hs256 with --target mints the buyers' tokens as the deployment checks them: it needs --buyer-issuer, --buyer-audience (BUYER_AUTH=hs256:<secret>, BUYER_AUTH_ISSUER, BUYER_AUTH_AUDIENCE)",
    );
    expect(() => parseOptions([...deployment, '--auth', 'es256'])).toThrow(
      "--auth es256 with --target: minting tokens the deployment's public key verifies needs its identity provider's private key",
    );
    expect(() => parseOptions([...deployment, '--auth', 'off,hs256', ...claims])).toThrow(
      '--auth with --target: the deployment runs one BUYER_AUTH; give off or hs256, not "off,hs256"',
    );
    expect(() => parseOptions([...deployment, '--auth', 'hs256', ...claims, '--pay', '0.5'])).toThrow(
      '--auth does not go with --pay or --retries yet',
    );
    // A deployment's secret, given where there is none to check it: said, not ignored.
    expect(() => parseOptions([...deployment, ...claims.slice(0, 2)])).toThrow(
      '--buyer-secret go with --target and --auth hs256 only',
    );
    expect(() => parseOptions(['--auth', 'hs256', ...claims])).toThrow(
      '--buyer-secret, --buyer-issuer, --buyer-audience go with --target and --auth hs256 only',
    );
  });

  it('takes --products N and --cluster K', () => {
    expect(parseOptions(['--products', '12', '--cluster', '3'])).toMatchObject({ products: 12, cluster: 3 });
  });

  it('runs with telemetry on and no pause by default; --telemetry on,off gives a row each, --watch asks for the pause', () => {
    expect(parseOptions([])).toMatchObject({ telemetry: [true], watch: false });
    expect(parseOptions(['--telemetry', 'on,off', '--watch'])).toMatchObject({ telemetry: [true, false], watch: true });
    expect(parseOptions(['--telemetry', 'off'])).toMatchObject({ telemetry: [false] });
  });

  it('runs without a waiting room by default; --queue off,RATE gives a row each, for one product with stock', () => {
    expect(parseOptions([])).toMatchObject({ queue: [0] });
    expect(parseOptions(['--queue', 'off,5000'])).toMatchObject({ queue: [0, 5000] });
    expect(() => parseOptions(['--queue', 'fast'])).toThrow('--queue must be an integer from 1 to 1000000, got "fast"');
    for (const other of [
      ['--products', '2'],
      ['--sold-out-path'],
      ['--pay', '0.5'],
      ['--retries', '1'],
      ['--starts-in', '500'],
    ]) {
      expect(() => parseOptions(['--queue', '100', ...other])).toThrow('--queue runs one product with stock');
    }
    expect(() => parseOptions(['--queue', '100', '--quantity', '2'])).toThrow('--queue buys one unit a buyer');
    // Without a waiting room, nothing changes.
    expect(parseOptions(['--queue', 'off', '--products', '2'])).toMatchObject({ queue: [0], products: 2 });
  });

  it('lists no catalog by default; --catalog N takes a whole number of idle products', () => {
    expect(parseOptions([])).toMatchObject({ catalog: 0 });
    expect(parseOptions(['--catalog', '10000'])).toMatchObject({ catalog: 10_000 });
    expect(parseOptions(['--catalog', '0'])).toMatchObject({ catalog: 0 });
  });

  it('sells from one bucket by default; --buckets 1,3 gives a row each, --skew F a share of buyers homed on bucket 0', () => {
    expect(parseOptions([])).toMatchObject({ buckets: [1] });
    expect(parseOptions([])).not.toHaveProperty('skew');
    expect(parseOptions(['--cluster', '3', '--buckets', '1,3'])).toMatchObject({ cluster: 3, buckets: [1, 3] });
    expect(parseOptions(['--buckets', '3,3'])).toMatchObject({ buckets: [3] });
    // Buckets on one Redis server are allowed (the report says so).
    expect(parseOptions(['--buckets', '3'])).toMatchObject({ buckets: [3] });
    expect(parseOptions(['--buckets', '1,3', '--skew', '0.9'])).toMatchObject({ buckets: [1, 3], skew: 0.9 });
    expect(parseOptions(['--buckets', '16', '--skew', '1'])).toMatchObject({ buckets: [16], skew: 1 });
  });

  it('runs without buyer tokens by default; --auth off,es256 gives a row each', () => {
    expect(parseOptions([])).toMatchObject({ auth: ['off'] });
    expect(parseOptions(['--auth', 'off,es256,hs256'])).toMatchObject({ auth: ['off', 'es256', 'hs256'] });
  });

  it.each([
    [['--auth', 'rs256'], '--auth takes off, hs256, es256 or a list of them, got "rs256"'],
    [['--auth', 'hs256', '--pay', '0.5'], '--auth does not go with --pay or --retries yet'],
    [['--auth', 'es256', '--retries', '2'], '--auth does not go with --pay or --retries yet'],
    [['--telemetry', 'no'], '--telemetry takes on, off or on,off, got "no"'],
    [['--cluster', '2'], '--cluster needs at least 3 masters (Redis Cluster will not form with fewer), got 2'],
    [['--cluster', '0'], '--cluster needs at least 3 masters'],
    [['--cluster', 'x'], '--cluster must be an integer from 3 to 32, got "x"'],
    [
      ['--cluster', '3', '--redis', 'redis://127.0.0.1:7000'],
      '--cluster starts its own Redis: it cannot go with --redis',
    ],
    [['--cluster', '3', '--baseline'], '--baseline runs on one Redis server: it cannot go with --cluster'],
    [['--products', '0'], '--products must be an integer from 1 to 1000, got "0"'],
    [['--products', '5', '--buyers', '4'], '--products 5 needs at least as many buyers, got --buyers 4'],
    [['--products', '2', '--retries', '1'], '--retries runs with one product only'],
    [['--catalog', 'many'], '--catalog must be an integer from 0 to 100000, got "many"'],
    [['--catalog=-5'], '--catalog must be an integer from 0 to 100000, got "-5"'],
    [['--catalog', '2.5'], '--catalog must be an integer from 0 to 100000, got "2.5"'],
    [['--catalog', '100001'], '--catalog must be an integer from 0 to 100000, got "100001"'],
    [['--buckets', '0'], '--buckets must be an integer from 1 to 16, got "0"'],
    [['--buckets', '1,17'], '--buckets must be an integer from 1 to 16, got "17"'],
    [['--buckets', 'three'], '--buckets must be an integer from 1 to 16, got "three"'],
    [['--skew', '0.9'], '--skew sends buyers to one bucket: it needs --buckets above 1'],
    [['--buckets', '1', '--skew', '0.9'], '--skew sends buyers to one bucket: it needs --buckets above 1'],
    [['--buckets', '3', '--skew', '1.5'], '--skew must be a fraction from 0 to 1, got "1.5"'],
    [['--buckets', '3', '--skew', '.5'], '--skew must be a fraction from 0 to 1, got ".5"'],
    [['--buckets', '3', '--skew', '0.9', '--products', '2'], '--skew runs one product, without --auth'],
    [['--buckets', '3', '--skew', '0.9', '--auth', 'hs256'], '--skew runs one product, without --auth'],
    [['--pay', '2'], '--pay must be a fraction from 0 to 1, got "2"'],
    [
      ['--target', 'http://a:1', '--admin-token', 'T', '--redis', 'redis://b:2', '--buckets', '3'],
      '--target runs against a deployment as it is: not with --buckets',
    ],
  ])('refuses %j', (argv, message) => {
    expect(() => parseOptions(argv)).toThrow(UsageError);
    expect(() => parseOptions(argv)).toThrow(message);
  });

  it("docs/bench.md's synopsis names every option the usage lists", () => {
    const flags = (text: string) => new Set([...text.matchAll(/--([a-z][a-z-]*)/g)].map((m) => m[1]));
    const page = readFileSync(join(__dirname, '..', 'docs', 'bench.md'), 'utf8');
    const synopsis = flags(/```sh\n([\s\S]*?)```/.exec(page)![1]);
    expect([...flags(USAGE)].filter((flag) => !synopsis.has(flag))).toEqual([]);
  });
});
