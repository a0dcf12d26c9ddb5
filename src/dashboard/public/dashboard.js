// The live sale page: plain browser JavaScript, no build step. Chart.js is served by
// the app from node_modules (/assets/chart.umd.min.js). Every rate is computed here by
// differencing successive events: orders from Redis's count of them, answers from the
// instances' counts summed.
(function () {
  'use strict';

  /** How much of the sale the charts keep. */
  const HISTORY_MS = 120000;
  /** A rate is taken over at least this much time, so a quarter second's noise does not show. */
  const RATE_WINDOW_MS = 1000;
  /** Before reconnecting after EventSource gave up (it retries by itself after a dropped stream). */
  const RECONNECT_MS = 3000;
  const CODE_COLORS = {
    CREATED: '#1f8a4c',
    REPLAYED: '#7bc89a',
    SOLD_OUT: '#6b7385',
    INSUFFICIENT_STOCK: '#9aa3b5',
    LIMIT_REACHED: '#b7791f',
    LOCK_TIMEOUT: '#c53030',
    LOCK_EXPIRED: '#e53e3e',
    STALE_LOCK: '#9b2c2c',
    CONTENTION: '#d69e2e',
    REDIS_UNAVAILABLE: '#553c9a',
    OUTCOME_UNKNOWN: '#805ad5',
  };
  const OTHER_COLORS = ['#3182ce', '#dd6b20', '#319795', '#d53f8c', '#718096', '#2c5282'];

  const $ = (id) => document.getElementById(id);
  const fmt = (n) => (typeof n === 'number' && Number.isFinite(n) ? n.toLocaleString('en-US') : '-');

  let productId = null;
  let source = null;
  let reconnect = null;
  let updates = 0;
  /** Successive events' orders written and answer totals, for the rates. */
  let samples = [];
  /** The `at` of the first event of this sale, the charts' zero. */
  let t0 = null;
  let last = null;

  function lineChart(canvas, datasets, yTitle) {
    return new Chart(canvas, {
      type: 'line',
      data: { datasets },
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        normalized: true,
        elements: { point: { radius: 0 }, line: { borderWidth: 2, tension: 0 } },
        interaction: { mode: 'nearest', axis: 'x', intersect: false },
        scales: {
          x: { type: 'linear', title: { display: true, text: 'seconds' }, ticks: { maxTicksLimit: 8 } },
          y: { beginAtZero: true, title: { display: Boolean(yTitle), text: yTitle } },
        },
        plugins: { legend: { labels: { boxWidth: 12 } } },
      },
    });
  }

  const stockChart = lineChart($('chart-stock'), [
    { label: 'stock left', data: [], borderColor: '#3182ce', backgroundColor: '#3182ce' },
    { label: 'units held', data: [], borderColor: '#1f8a4c', backgroundColor: '#1f8a4c' },
    { label: 'initial stock', data: [], borderColor: '#9aa3b5', backgroundColor: '#9aa3b5', borderDash: [6, 4] },
  ]);
  // Oversold stock (an unsafe strategy) goes below 0: the axis follows it there.
  stockChart.options.scales.y.beginAtZero = false;
  stockChart.options.scales.y.suggestedMin = 0;
  const ordersChart = lineChart(
    $('chart-orders'),
    [{ label: 'orders / s', data: [], borderColor: '#1f8a4c', backgroundColor: '#1f8a4c' }],
    'orders / s',
  );
  const answersChart = lineChart($('chart-answers'), [], 'answers / s');

  function colorOf(code) {
    if (CODE_COLORS[code]) return CODE_COLORS[code];
    let h = 0;
    for (const c of code) h = (h * 31 + c.charCodeAt(0)) >>> 0;
    return OTHER_COLORS[h % OTHER_COLORS.length];
  }

  function setConnection(state, text) {
    const el = $('connection');
    el.dataset.connection = state;
    el.textContent = text || state;
  }

  function clearSale() {
    samples = [];
    t0 = null;
    last = null;
    for (const chart of [stockChart, ordersChart, answersChart]) {
      for (const ds of chart.data.datasets) ds.data = [];
      chart.update('none');
    }
    answersChart.data.datasets = [];
    $('answers').tBodies[0].replaceChildren();
  }

  /** Answers by code, summed over the instances. */
  function totalsOf(event) {
    const totals = {};
    for (const instance of event.instances) {
      for (const [code, n] of Object.entries(instance.answers)) totals[code] = (totals[code] || 0) + n;
    }
    return totals;
  }

  /**
   * A new sale of the same product: another sale id (or stock). Not units held going
   * down: a cancel or an expiry gives units back within the same sale.
   */
  function restarted(event) {
    if (!last) return false;
    return event.saleId !== last.event.saleId || event.initialStock !== last.event.initialStock;
  }

  /** The sample to difference against: the newest one at least RATE_WINDOW_MS old, else the oldest. */
  function reference(at) {
    let ref = null;
    for (const s of samples) {
      if (at - s.at >= RATE_WINDOW_MS) ref = s;
      else break;
    }
    if (!ref && samples.length > 0 && at - samples[0].at >= RATE_WINDOW_MS / 4) ref = samples[0];
    return ref;
  }

  function pushPoint(dataset, x, y, from) {
    dataset.data.push({ x, y });
    while (dataset.data.length > 0 && dataset.data[0].x < from) dataset.data.shift();
  }

  function update(event) {
    if (event.productId !== productId) return;
    updates++;
    document.body.dataset.updates = String(updates);
    setConnection('live');
    const totals = totalsOf(event);
    if (restarted(event)) clearSale();
    if (t0 === null) t0 = event.at;
    const x = (event.at - t0) / 1000;
    const from = x - HISTORY_MS / 1000;

    const ref = reference(event.at);
    const seconds = ref ? (event.at - ref.at) / 1000 : 0;
    const written = event.orders ? event.orders.written : null;
    const ordersPerSec = ref && written !== null && ref.written !== null ? (written - ref.written) / seconds : null;
    const rates = {};
    if (ref) for (const code of Object.keys(totals)) rates[code] = (totals[code] - (ref.totals[code] || 0)) / seconds;
    samples.push({ at: event.at, written, totals });
    while (samples.length > 0 && event.at - samples[0].at > HISTORY_MS) samples.shift();

    showNumbers(event, ordersPerSec);
    showAnswers(totals, rates);
    showInstances(event, totals);
    showBuckets(event);

    if (event.initialStock !== null) {
      const [stockLeft, held, initial] = stockChart.data.datasets;
      pushPoint(stockLeft, x, event.stock, from);
      pushPoint(held, x, event.sold, from);
      pushPoint(initial, x, event.initialStock, from);
    }
    if (ordersPerSec !== null) pushPoint(ordersChart.data.datasets[0], x, Math.round(ordersPerSec), from);
    if (ref) {
      for (const [code, rate] of Object.entries(rates)) {
        let ds = answersChart.data.datasets.find((d) => d.label === code);
        if (!ds) {
          ds = { label: code, data: [], borderColor: colorOf(code), backgroundColor: colorOf(code) };
          answersChart.data.datasets.push(ds);
        }
        pushPoint(ds, x, Math.round(rate), from);
      }
    }
    for (const chart of [stockChart, ordersChart, answersChart]) chart.update('none');
    last = { event, totals };
  }

  function showNumbers(event, ordersPerSec) {
    $('initial-stock').textContent = fmt(event.initialStock);
    $('stock-left').textContent = fmt(event.stock);
    $('units-held').textContent = fmt(event.sold);
    // The orders by state, from Redis ('-' for a count the sale's Redis does not keep).
    const orders = event.orders || {};
    $('orders-written').textContent = fmt(orders.written);
    for (const state of ['reserved', 'paid', 'cancelled', 'expired'])
      $(`orders-${state}`).textContent = fmt(orders[state]);
    $('units-returned').textContent = fmt(orders.unitsReturned);
    // Settlement into PostgreSQL (with DATABASE_URL): how far behind the order stream it is.
    $('settlement-stat').hidden = !event.settlement;
    if (event.settlement) {
      $('unsettled').textContent = fmt(event.settlement.unsettled);
      $('unsettled-note').textContent =
        event.settlement.unsettled > 0 ? `oldest ${(event.settlement.oldestMs / 1000).toFixed(1)} s` : 'all settled';
    }
    $('orders-per-sec').textContent = ordersPerSec === null ? '-' : fmt(Math.round(ordersPerSec));
    $('lock-holder').textContent = event.lock ? fmt(event.lock.holderPid) : '-';
    const lockText = [];
    if (event.lock) lockText.push(event.lock.ttlMs >= 0 ? `held, ${fmt(event.lock.ttlMs)} ms left` : 'held, no TTL!');
    else if (!event.lockNote) lockText.push('free');
    if (event.lockNote) lockText.push(event.lockNote);
    $('lock-note').textContent = lockText.join(' · ');
    const telemetry = event.telemetry;
    const sum = (key) => event.instances.reduce((a, i) => a + i[key], 0);
    $('waiting').textContent = telemetry ? fmt(sum('waiting')) : '-';
    $('lost-locks').textContent = telemetry ? fmt(sum('lostLocks')) : '-';
    $('telemetry-off').hidden = telemetry;

    let state = 'no-sale';
    if (event.initialStock !== null) state = event.initialStock > 0 && event.stock <= 0 ? 'sold-out' : 'on-sale';
    // The window, by Redis's clock as the event read it (never the viewer's clock).
    const w = event.window;
    let stateText = state.replace('-', ' ');
    if (w && w.startsAt !== null && w.redisNow < w.startsAt) {
      state = 'not-started';
      stateText = `opens in ${countdown(w.startsAt - w.redisNow)}`;
    } else if (w && w.endsAt !== null && w.redisNow >= w.endsAt) {
      state = 'ended';
      stateText = 'ended';
    }
    const saleState = $('sale-state');
    saleState.dataset.state = state;
    saleState.textContent = stateText;
    $('window-stat').hidden = !w || (w.startsAt === null && w.endsAt === null);
    if (w) {
      const at = (ms) => (ms === null ? '-' : new Date(ms).toISOString().replace('T', ' ').slice(0, 19));
      $('window').textContent = `${at(w.startsAt)} → ${at(w.endsAt)}`;
      $('window-note').textContent =
        w.endsAt !== null && w.redisNow < w.endsAt && (w.startsAt === null || w.redisNow >= w.startsAt)
          ? `closes in ${countdown(w.endsAt - w.redisNow)}`
          : "UTC, by Redis's clock";
    }
    $('strategy').textContent = `strategy ${event.strategy}`;
  }

  /** `1 h 02 min`, `3 min 05 s`, `12.4 s`: what is left of a wait. */
  function countdown(ms) {
    const s = Math.max(0, ms) / 1000;
    if (s < 60) return `${s.toFixed(1)} s`;
    const pad = (n) => String(Math.floor(n)).padStart(2, '0');
    if (s < 3600) return `${Math.floor(s / 60)} min ${pad(s % 60)} s`;
    return `${Math.floor(s / 3600)} h ${pad((s % 3600) / 60)} min`;
  }

  /** What the answers table calls a code: the two 201s say which they are. */
  const CODE_NAMES = { CREATED: 'CREATED (201, an order)', REPLAYED: 'REPLAYED (201, an order again)' };
  /** The 201s first (CREATED, then REPLAYED), then by count. */
  const RANK = { CREATED: 0, REPLAYED: 1 };

  /** One row per code, the 201s first, then by count. */
  function showAnswers(totals, rates) {
    const body = $('answers').tBodies[0];
    const rank = (code) => (code in RANK ? RANK[code] : 2);
    const codes = Object.keys(totals).sort((a, b) => rank(a) - rank(b) || totals[b] - totals[a] || (a < b ? -1 : 1));
    const rows = codes.map((code) => {
      let row = body.querySelector(`tr[data-code="${code}"]`);
      if (!row) {
        row = document.createElement('tr');
        row.dataset.code = code;
        row.innerHTML = '<td class="code"></td><td class="count num"></td><td class="rate num"></td>';
        row.querySelector('.code').textContent = CODE_NAMES[code] || code;
        row.querySelector('.code').style.color = colorOf(code);
      }
      row.querySelector('.count').textContent = fmt(totals[code]);
      row.querySelector('.rate').textContent = code in rates ? fmt(Math.round(rates[code])) : '-';
      return row;
    });
    body.replaceChildren(...rows);
  }

  /** The row of `body` whose data-`key` is `id`, made with `cells` (its `.id` cell naming it) the first time. */
  function rowOf(body, key, id, cells) {
    let row = body.querySelector(`tr[data-${key}="${CSS.escape(id)}"]`);
    if (!row) {
      row = document.createElement('tr');
      row.dataset[key] = id;
      row.innerHTML = cells;
      row.querySelector('.id').textContent = id;
    }
    return row;
  }

  function showInstances(event, totals) {
    const body = $('instances').tBodies[0];
    const created = totals.CREATED || 0;
    const rows = event.instances.map((instance) => {
      const row = rowOf(
        body,
        'instance',
        instance.id,
        '<td class="id"></td><td class="pid num"></td><td class="share num"></td><td class="answers num"></td>' +
          '<td class="waiting num"></td><td class="lost-locks num"></td><td class="seen num"></td>',
      );
      const answers = Object.values(instance.answers).reduce((a, n) => a + n, 0);
      const mine = instance.answers.CREATED || 0;
      row.querySelector('.pid').textContent = String(instance.pid);
      row.querySelector('.share').textContent =
        created > 0 ? `${(Math.round((mine / created) * 1000) / 10).toLocaleString('en-US')}%` : '-';
      row.querySelector('.answers').textContent = fmt(answers);
      row.querySelector('.waiting').textContent = fmt(instance.waiting);
      row.querySelector('.lost-locks').textContent = fmt(instance.lostLocks);
      // Stale: it had buyers waiting and stopped publishing (crashed): they are not counted.
      row.querySelector('.seen').textContent = instance.stale
        ? 'gone'
        : instance.seenMsAgo < 1000
          ? 'now'
          : `${fmt(Math.round(instance.seenMsAgo / 1000))} s ago`;
      row.classList.toggle('gone', Boolean(instance.stale));
      return row;
    });
    body.replaceChildren(...rows);
  }

  /** The escrow buckets: their count, and a row each when there are several. */
  function showBuckets(event) {
    const buckets = event.buckets || [];
    $('buckets').textContent = event.buckets ? fmt(buckets.length) : '-';
    $('buckets-table').hidden = buckets.length < 2;
    const body = $('buckets-table').tBodies[0];
    const rows = buckets.map((bucket) => {
      const row = rowOf(
        body,
        'bucket',
        bucket.id,
        '<td class="id"></td><td class="initial num"></td><td class="stock num"></td>' +
          '<td class="orders num"></td><td class="in-flight num"></td><td class="lock"></td>',
      );
      row.querySelector('.initial').textContent = fmt(bucket.initialStock);
      row.querySelector('.stock').textContent = fmt(bucket.stock);
      row.querySelector('.orders').textContent = fmt(bucket.orders);
      row.querySelector('.in-flight').textContent = fmt(bucket.inFlight);
      // Each bucket's own lock, as the product's lock line says it (free, or its holder).
      row.querySelector('.lock').textContent = bucket.lock
        ? `${fmt(bucket.lock.holderPid)}, ${bucket.lock.ttlMs >= 0 ? `${fmt(bucket.lock.ttlMs)} ms left` : 'no TTL!'}`
        : event.lockNote
          ? '-'
          : 'free';
      return row;
    });
    body.replaceChildren(...rows);
  }

  function connect() {
    clearTimeout(reconnect);
    if (source) source.close();
    const es = new EventSource(`/api/live/${encodeURIComponent(productId)}`);
    source = es;
    $('stream-url').textContent = `/api/live/${productId}`;
    es.onmessage = (e) => update(JSON.parse(e.data));
    es.onerror = () => {
      if (source !== es) return;
      // The app stopped or restarts: keep the last state on screen. EventSource
      // reconnects by itself after a dropped stream; after a refused one it gives up.
      setConnection('disconnected');
      if (es.readyState === EventSource.CLOSED) reconnect = setTimeout(connect, RECONNECT_MS);
    };
  }

  function watch(id) {
    productId = id;
    $('product-input').value = id;
    $('no-product').hidden = true;
    const url = new URL(location.href);
    url.searchParams.set('product', id);
    history.replaceState(null, '', url);
    clearSale();
    setConnection('connecting');
    connect();
  }

  /** No ?product=: the product this instance saw last, once there is one. */
  async function pickProduct() {
    try {
      const res = await fetch('/api/live');
      const list = await res.json();
      if (list.products.length > 0) return watch(list.products[0].productId);
      $('telemetry-off').hidden = list.telemetry;
      $('no-product').hidden = false;
      setConnection('waiting', 'waiting for a sale');
    } catch {
      setConnection('disconnected');
    }
    reconnect = setTimeout(pickProduct, RECONNECT_MS);
  }

  $('product-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const id = $('product-input').value.trim();
    if (id) watch(id);
  });

  const chosen = new URLSearchParams(location.search).get('product');
  if (chosen) watch(chosen);
  else void pickProduct();
})();
