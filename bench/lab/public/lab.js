/*
 * The lab page: Run buttons post to /api/runs, /api/events streams every run's events
 * (Server-Sent Events), and each lane draws its run on the shared chart as it happens:
 * units sold (read from Redis by the CLI) against the stock line, answers by code, a
 * fault's named steps, and at the end the verdict the CLI read from Redis.
 */
(function () {
  'use strict';
  var PROMISES = {
    noOversell: 'units sold never exceed the stock; stock never below 0',
    noUndersell: 'with demand above the stock, the sale ends sold out: nobody refused while stock remained',
    conservation: 'initial stock = stock left + units in recorded orders; every 201 is in the order log',
    perUserLimit: 'no buyer holds more than the per-user limit',
    accounting: 'every request got exactly one definite answer, none a 5xx without cause',
    exactlyOnce: 'no order written twice; every acknowledged order exists once',
    settled: 'every order in PostgreSQL exactly once, with the status Redis has',
    window: 'no order before the sale started, by Redis’s clock',
    history:
      'the whole history holds: never more units held than the stock at any instant, no refusal false over its whole request, no write outside its request (docs/history.md)',
  };
  var COLOURS = { left: '#1f77b4', right: '#d62728' };
  var runs = {};
  var lanes = { left: null, right: null };
  var fmt = function (x) {
    return Number(x).toLocaleString('en-US');
  };
  var $ = function (sel, root) {
    return (root || document).querySelector(sel);
  };
  var el = function (tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      e.setAttribute(k, attrs[k]);
    });
    if (text !== undefined) e.textContent = text;
    return e;
  };

  if (window.mermaid) {
    window.mermaid.initialize({ startOnLoad: false, securityLevel: 'strict' });
    window.mermaid.run({ querySelector: 'pre.mermaid' }).catch(function () {
      /* a diagram that fails shows its source */
    });
  }

  var chart = new Chart($('#chart'), {
    type: 'line',
    data: { datasets: [] },
    options: {
      animation: false,
      maintainAspectRatio: false,
      parsing: false,
      normalized: true,
      scales: {
        x: {
          type: 'linear',
          min: 0,
          title: { display: true, text: 'ms since the sale started (each run its own start)' },
        },
        y: { beginAtZero: true, title: { display: true, text: 'units sold (from Redis)' } },
      },
      plugins: { legend: { position: 'bottom' } },
    },
  });
  window.labChart = chart;

  function datasets(side) {
    var run = lanes[side] && runs[lanes[side]];
    if (!run) return [];
    var name = side + ': ' + runTitle(run);
    var out = [];
    // Live: Redis's stock key, sampled as the sale ran; once finished, also the order
    // stream's every sale, as the bench's report draws it.
    var result = run.result && run.result.rows && run.result.rows[0];
    out.push({
      label: name + ' (units sold, live)',
      lane: side,
      kind: 'live',
      data: run.live.map(function (p) {
        return { x: p.ms, y: p.sold };
      }),
      borderColor: COLOURS[side],
      backgroundColor: COLOURS[side],
      borderWidth: result ? 1 : 2,
      borderDash: result ? [2, 2] : [],
      pointRadius: result ? 0 : 2,
    });
    if (result) {
      out.push({
        label: name + ' (units sold, from the order stream)',
        lane: side,
        kind: 'sold',
        data: result.soldOverTime.map(function (p) {
          return { x: p.ms, y: p.units };
        }),
        borderColor: COLOURS[side],
        backgroundColor: COLOURS[side],
        stepped: true,
        pointRadius: 0,
        borderWidth: 2,
      });
    }
    if (run.stock !== undefined) {
      var end = Math.max(1, maxX());
      out.push({
        label: side + ': stock ' + fmt(run.stock),
        lane: side,
        kind: 'stock',
        data: [
          { x: 0, y: run.stock },
          { x: end, y: run.stock },
        ],
        borderColor: COLOURS[side],
        borderDash: [6, 4],
        pointRadius: 0,
        borderWidth: 1,
      });
    }
    if (run.steps.length) {
      out.push({
        label: side + (run.summary.request.kind === 'fault' ? ': fault steps' : ': steps'),
        lane: side,
        kind: 'steps',
        type: 'scatter',
        data: run.steps.map(function (s) {
          return { x: s.ms, y: soldAt(run, s.ms), step: s.step };
        }),
        borderColor: '#000',
        backgroundColor: COLOURS[side],
        pointRadius: 6,
        pointStyle: 'triangle',
      });
    }
    return out;
  }

  function maxX() {
    var end = 0;
    ['left', 'right'].forEach(function (side) {
      var run = lanes[side] && runs[lanes[side]];
      if (!run) return;
      run.live.forEach(function (p) {
        end = Math.max(end, p.ms);
      });
      run.steps.forEach(function (s) {
        end = Math.max(end, s.ms);
      });
      var row = run.result && run.result.rows && run.result.rows[0];
      if (row)
        row.soldOverTime.forEach(function (p) {
          end = Math.max(end, p.ms);
        });
    });
    return end;
  }

  function soldAt(run, ms) {
    var y = 0;
    run.live.forEach(function (p) {
      if (p.ms <= ms) y = p.sold;
    });
    return y;
  }

  function redraw() {
    chart.data.datasets = datasets('left').concat(datasets('right'));
    chart.update();
  }

  function runTitle(run) {
    var r = run.summary.request;
    if (r.kind === 'shards')
      return 'buckets: ' + r.buckets + ' on 3 masters (' + fmt(r.buyers) + ' buyers, stock ' + fmt(r.stock) + ')';
    return r.kind === 'strategy'
      ? r.strategy + ' (' + fmt(r.buyers) + ' buyers, stock ' + fmt(r.stock) + ')'
      : r.scenario + (r.size === 'quick' ? ' (quick)' : '');
  }

  function stateText(run) {
    var s = run.summary;
    if (s.state === 'queued')
      return (
        'waiting in line: ' + s.position + ' run' + (s.position === 1 ? '' : 's') + ' ahead (one experiment at a time)'
      );
    if (s.state === 'running') return 'running (pid ' + s.pid + ')';
    if (s.state === 'stopped') return 'stopped: its processes ended';
    if (s.state === 'timed-out') return s.message || 'timed out: stopped with its processes';
    if (s.state === 'failed')
      return s.message ? 'failed: ' + s.message : 'failed (exit ' + s.exitCode + '): ' + lastLogs(run);
    return 'finished (exit ' + s.exitCode + ')';
  }

  function lastLogs(run) {
    return run.logs.slice(-3).join(' | ');
  }

  function renderLane(side) {
    var box = $('#lane-' + side);
    var run = lanes[side] && runs[lanes[side]];
    if (!run) return;
    box.dataset.run = run.summary.id;
    box.dataset.state = run.summary.state;
    $('.title', box).textContent = '#' + run.summary.id + ' ' + runTitle(run);
    $('.command', box).textContent = run.summary.command;
    $('.state', box).textContent = stateText(run);
    $('.stop', box).hidden = !(run.summary.state === 'queued' || run.summary.state === 'running');
    $('.rerun', box).hidden = run.summary.state === 'queued' || run.summary.state === 'running';
    var report = $('.report', box);
    report.hidden = !run.summary.reportUrl;
    if (run.summary.reportUrl) report.href = run.summary.reportUrl;
    var codes = $('.codes', box);
    codes.textContent = '';
    var row = run.result && run.result.rows && run.result.rows[0];
    var shown = row ? row.codes : run.codes;
    Object.keys(shown)
      .sort()
      .forEach(function (c) {
        var tr = el('tr', { 'data-code': c });
        tr.append(el('td', {}, c), el('td', { class: 'n' }, fmt(shown[c])));
        codes.append(tr);
      });
    var timeline = $('.timeline', box);
    timeline.textContent = '';
    run.steps.forEach(function (s) {
      var li = el('li', { 'data-step': s.step });
      li.append(el('b', {}, fmt(s.ms) + ' ms ' + s.step), document.createTextNode(s.detail ? ': ' + s.detail : ''));
      timeline.append(li);
    });
    renderVerdict($('.verdict', box), run);
  }

  function renderVerdict(box, run) {
    box.textContent = '';
    delete box.dataset.pass;
    var row = run.result && run.result.rows && run.result.rows[0];
    if (row) {
      box.dataset.pass = String(row.pass);
      box.dataset.sold = String(row.sold);
      box.dataset.oversold = String(row.oversold);
      box.dataset.stockLeft = String(row.stockLeft);
      box.append(
        el('h4', {}, row.pass ? (row.unsafe ? 'expected failure shown' : 'PASS: every promise kept') : 'FAIL'),
        el(
          'p',
          {},
          'sold ' +
            fmt(row.sold) +
            ' of ' +
            fmt(row.stock) +
            ', stock left ' +
            fmt(row.stockLeft) +
            ', oversold ' +
            fmt(row.oversold) +
            (row.attempts > 1
              ? ' (sale ' + row.attempts + ' of up to 3: the control is run again until it shows its oversell)'
              : ''),
        ),
      );
      var ul = el('ul', { class: 'invariants' });
      Object.keys(row.invariants).forEach(function (k) {
        var held = row.invariants[k];
        var li = el('li', { 'data-invariant': k, 'data-held': String(held), class: held ? 'held' : 'broken' });
        li.append(
          el('b', {}, (held ? 'held ' : 'BROKEN ') + k),
          document.createTextNode(': ' + (held ? PROMISES[k] || '' : row.broken[k] || '')),
        );
        ul.append(li);
      });
      box.append(ul);
      if (row.history) box.append(historyLine(row.history.holds, row.history.line));
      return;
    }
    if (run.outcomes.length) {
      var pass = run.outcomes.every(function (o) {
        return o.pass;
      });
      box.dataset.pass = String(pass);
      run.outcomes.forEach(function (o) {
        var div = el('div', { class: 'outcome', 'data-pass': String(o.pass) });
        div.append(
          el('h4', {}, (o.pass ? 'PASS ' : 'FAIL ') + o.name),
          el(
            'p',
            { class: 'invariants-line' },
            o.problems.length
              ? 'BROKEN: ' + o.problems.join('; ')
              : o.lesson
                ? 'every promise held except ' + o.lesson
                : o.oversold
                  ? 'every promise held except noOversell, which plain lock cannot keep here (no fence)'
                  : 'every promise held',
          ),
          el('p', { class: 'story' }, o.story),
        );
        // The history checker's line: the peak held, and each check (docs/history.md).
        if (o.history) div.append(historyLine(/^history holds/.test(o.history), o.history));
        box.append(div);
      });
    }
  }

  /** The history checker's line for a sale, marked as holding or not. */
  function historyLine(holds, line) {
    return el('p', { class: 'history', 'data-holds': String(holds) }, line);
  }

  function renderRuns() {
    var body = $('#runs tbody');
    body.textContent = '';
    Object.keys(runs)
      .map(Number)
      .sort(function (a, b) {
        return a - b;
      })
      .forEach(function (id) {
        var run = runs[id];
        var row = run.result && run.result.rows && run.result.rows[0];
        var verdict = row
          ? row.pass
            ? row.unsafe
              ? 'failure shown'
              : 'pass'
            : 'FAIL'
          : run.outcomes.length
            ? run.outcomes.every(function (o) {
                return o.pass;
              })
              ? 'pass'
              : 'FAIL'
            : '';
        var tr = el('tr', { 'data-run': id, 'data-state': run.summary.state });
        var links = el('td');
        if (run.summary.reportUrl)
          links.append(
            el('a', { href: run.summary.reportUrl, target: '_blank' }, 'report'),
            document.createTextNode(' '),
          );
        var again = el('button', { class: 'rerun' }, 'run again');
        again.onclick = function () {
          submit(run.summary.request, run.summary.lane);
        };
        links.append(again);
        tr.append(
          el('td', {}, '#' + id),
          el('td', {}, runTitle(run)),
          el('td', {}, run.summary.state),
          el('td', {}, verdict),
          links,
        );
        body.append(tr);
      });
  }

  function onEvent(msg) {
    var s = msg.run;
    var run = runs[s.id];
    if (!run) {
      run = runs[s.id] = { summary: s, live: [], codes: {}, steps: [], outcomes: [], logs: [], result: null };
      lanes[s.lane] = s.id;
    }
    run.summary = s;
    var e = msg.event;
    if (e.type === 'sale') {
      run.live = [];
      run.codes = {};
      run.stock = e.stock;
    }
    if (e.type === 'scenario') {
      run.live = [];
      run.steps = [];
    }
    if (e.type === 'progress') {
      run.live.push({ ms: e.ms, sold: e.sold });
      run.codes = e.codes;
      run.stock = e.stock;
    }
    if (e.type === 'step') run.steps.push(e);
    if (e.type === 'outcome') run.outcomes.push(e);
    if (e.type === 'log') run.logs.push(e.line);
    if (e.type === 'result') run.result = e;
    if (e.type === 'log') return;
    if (lanes[s.lane] === s.id) {
      renderLane(s.lane);
      redraw();
    }
    renderRuns();
  }

  // The event stream opens once there is something to follow: a page with no run holds
  // no request open (a headless browser's --dump-dom waits for the network to go idle),
  // and asks /api/runs now and then instead, to learn of a run started elsewhere.
  // Each event has its id: a reconnecting EventSource sends the last one it saw
  // (Last-Event-ID) and the lab sends only those after it; one seen already is skipped.
  // The stream starts by naming the lab's session: one that differs from the session
  // this page followed is a lab restarted on the same port, whose runs are not the
  // ones shown (its run #1 is another run), so the page starts again from that lab.
  var source = null;
  var session = null;
  var lastId = 0;
  var polling = null;
  function listen() {
    if (source) return;
    if (polling) clearInterval(polling);
    source = new EventSource('/api/events');
    source.addEventListener('session', function (m) {
      var now = JSON.parse(m.data).session;
      if (session !== null && now !== session) location.reload();
      session = now;
    });
    source.onmessage = function (m) {
      var id = Number(m.lastEventId);
      if (id && id <= lastId) return;
      if (id) lastId = id;
      onEvent(JSON.parse(m.data));
    };
  }
  function anyRuns() {
    return fetch('/api/runs')
      .then(function (r) {
        return r.json();
      })
      .then(function (list) {
        if (list.length > 0) listen();
      })
      .catch(function () {
        /* the lab is gone: the next poll asks again */
      });
  }
  anyRuns().then(function () {
    if (!source) polling = setInterval(anyRuns, 2000);
  });

  function submit(request, lane) {
    listen();
    var body = Object.assign({}, request, { lane: lane });
    return fetch('/api/runs', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
      .then(function (r) {
        return r.json().then(function (j) {
          return { ok: r.ok, body: j };
        });
      })
      .then(function (r) {
        if (!r.ok) {
          alert(r.body.code + ': ' + r.body.message);
          return;
        }
        lanes[lane] = r.body.id;
        if (!runs[r.body.id])
          runs[r.body.id] = { summary: r.body, live: [], codes: {}, steps: [], outcomes: [], logs: [], result: null };
        renderLane(lane);
        redraw();
        document.getElementById('compare').scrollIntoView({ behavior: 'smooth' });
      });
  }

  document.querySelectorAll('form.run').forEach(function (form) {
    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      var lane = (ev.submitter && ev.submitter.value) || 'left';
      var data = new FormData(form);
      var sale = {
        buyers: Number(data.get('buyers')),
        stock: Number(data.get('stock')),
        connections: Number(data.get('connections')),
      };
      var request =
        form.dataset.kind === 'strategy'
          ? Object.assign({ kind: 'strategy', strategy: data.get('strategy') }, sale)
          : form.dataset.kind === 'shards'
            ? Object.assign({ kind: 'shards', buckets: Number(data.get('buckets')) }, sale)
            : { kind: 'fault', scenario: data.get('scenario'), size: data.get('size') };
      submit(request, lane);
    });
  });

  ['left', 'right'].forEach(function (side) {
    var box = $('#lane-' + side);
    $('.stop', box).onclick = function () {
      if (lanes[side])
        fetch('/api/runs/' + lanes[side] + '/stop', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{}',
        });
    };
    $('.rerun', box).onclick = function () {
      if (lanes[side]) submit(runs[lanes[side]].summary.request, side);
    };
  });
})();
