// heaplive report's script: draws the JSON of #heaplive-data (README,
// "heaplive report"). No library, no network: inline SVG and tables.
(function () {
  'use strict';
  var errors = document.getElementById('heaplive-errors');
  function fail(msg) { errors.textContent += msg + '\n'; }
  window.addEventListener('error', function (e) { fail('error: ' + e.message); });

  var SVGNS = 'http://www.w3.org/2000/svg';
  var COLORS = ['#d62728', '#2ca02c', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#bcbd22', '#7f7f7f'];
  // Timeline columns (README, "The timeline").
  var T = 0, KIND = 2, LIVE = 3, LOW = 4, HIGH = 5, ALLOC = 6, RSS = 7, KINDS = 8, OWN = 9, DUMP = 10;

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function sv(tag, attrs, text) {
    var e = document.createElementNS(SVGNS, tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function human(b) {
    if (b === null || b === undefined) return '-';
    var u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], i = 0, x = Math.abs(b);
    while (x >= 1024 && i < u.length - 1) { x /= 1024; i++; }
    return (b < 0 ? '-' : '') + (i === 0 ? x.toFixed(0) : x.toFixed(1)) + ' ' + u[i];
  }
  function frames(stack) { return stack.split(';'); }
  // Leaf first, the innermost frames that say the most.
  function shortStack(stack) {
    var f = frames(stack).reverse();
    return f.slice(0, 6).join(' \u2190 ') + (f.length > 6 ? ' \u2190 \u2026' : '');
  }
  // The two innermost frames: a line's name in the legend.
  function leaf(stack) {
    var f = frames(stack).reverse().filter(function (x, i, a) { return i === 0 || x !== a[i - 1]; });
    return f.slice(0, 3).join(' \u2190 ');
  }
  function table(cls, heads) {
    var t = el('table', { 'class': cls }), tr = el('tr');
    heads.forEach(function (h) { tr.appendChild(el('th', { 'class': h[1] || '' }, h[0])); });
    var thead = el('thead'); thead.appendChild(tr); t.appendChild(thead);
    t.appendChild(el('tbody'));
    return t;
  }
  function addRow(t, cells, stack) {
    var tr = el('tr');
    if (stack !== undefined) tr.setAttribute('data-stack', stack);
    cells.forEach(function (c) {
      var node = typeof c[0] === 'object' && c[0] !== null;
      var td = el('td', { 'class': c[1] || '' }, node ? undefined : c[0]);
      if (node) td.appendChild(c[0]);
      if (c[2]) td.title = c[2];
      tr.appendChild(td);
    });
    t.tBodies[0].appendChild(tr);
  }
  function select(options, chosen, onchange) {
    var s = el('select');
    options.forEach(function (o, i) {
      var opt = el('option', { value: String(i) }, o);
      if (i === chosen) opt.selected = true;
      s.appendChild(opt);
    });
    s.addEventListener('change', function () { onchange(Number(s.value)); });
    return s;
  }
  function flame(box, svg, what) {
    box.textContent = '';
    if (!svg) { box.appendChild(el('div', { 'class': 'note' }, 'No flame graph embedded for ' + what + ' (heaplive flamegraph draws any dump).')); return; }
    var f = el('iframe', { 'class': 'flame', title: what, sandbox: 'allow-scripts' });
    // As tall as the graph (inferno writes its height on the root element),
    // up to 720 px (deeper graphs scroll inside; their roots are on top).
    var h = /<svg[^>]*?\sheight="(\d+)"/.exec(svg);
    if (h) f.style.height = Math.min(Number(h[1]) + 40, 720) + 'px';
    f.srcdoc = svg;
    box.appendChild(f);
  }

  // Memory over time: live with its band, RSS and its kinds and heaplive's
  // own at dumps, dump and leak marks, the top stacks' lines.
  function chart(p) {
    var rows = p.timeline.rows, W = 1000, H = 300, L = 70, R = 10, TOP = 10, B = 30;
    var svg = sv('svg', { 'class': 'chart', viewBox: '0 0 ' + W + ' ' + H, preserveAspectRatio: 'none' });
    var dumpT = p.dumps.map(function (d) { return d.t_ms; });
    var ts = rows.map(function (r) { return r[T]; }).concat(dumpT.filter(function (t) { return t !== undefined; }));
    if (ts.length === 0) return null;
    var t0 = Math.min.apply(null, ts), t1 = Math.max.apply(null, ts);
    if (t1 === t0) t1 = t0 + 1;
    var ymax = 1;
    rows.forEach(function (r) { ymax = Math.max(ymax, r[HIGH] || 0, r[LIVE] || 0, r[RSS] || 0, r[OWN] || 0); });
    p.series.forEach(function (s) { s.bytes.forEach(function (b) { ymax = Math.max(ymax, b); }); });
    ymax *= 1.05;
    function x(t) { return L + (t - t0) / (t1 - t0) * (W - L - R); }
    function y(b) { return H - B - b / ymax * (H - TOP - B); }
    for (var i = 0; i <= 4; i++) {
      var b = ymax * i / 4;
      svg.appendChild(sv('line', { x1: L, x2: W - R, y1: y(b), y2: y(b), stroke: '#e4e4e4' }));
      svg.appendChild(sv('text', { x: L - 4, y: y(b) + 4, 'text-anchor': 'end' }, human(b)));
    }
    for (i = 0; i <= 5; i++) {
      var t = t0 + (t1 - t0) * i / 5;
      svg.appendChild(sv('text', { x: x(t), y: H - 10, 'text-anchor': 'middle' }, (t / 1000).toFixed(t1 - t0 < 5000 ? 2 : 1) + ' s'));
    }
    // The live total's 95% band.
    if (rows.length > 0) {
      var up = rows.map(function (r) { return x(r[T]) + ',' + y(r[HIGH]); });
      var down = rows.map(function (r) { return x(r[T]) + ',' + y(r[LOW]); }).reverse();
      svg.appendChild(sv('polygon', { 'class': 'band', points: up.concat(down).join(' '), fill: '#1f77b433', stroke: 'none' }));
      svg.appendChild(sv('polyline', { 'class': 'live', points: rows.map(function (r) { return x(r[T]) + ',' + y(r[LIVE]); }).join(' '), fill: 'none', stroke: '#1f77b4', 'stroke-width': 1.5 }));
    }
    // RSS (and its kinds) and heaplive's own, where read (dump rows).
    var dumpRows = rows.filter(function (r) { return r[RSS] !== null; });
    function line(cls, pts, color, dash) {
      if (pts.length === 0) return;
      var a = { 'class': cls, points: pts.join(' '), fill: 'none', stroke: color, 'stroke-width': 1.5 };
      if (dash) a['stroke-dasharray'] = dash;
      svg.appendChild(sv('polyline', a));
    }
    line('rss', dumpRows.map(function (r) { return x(r[T]) + ',' + y(r[RSS]); }), '#ff7f0e');
    var kinds = {};
    dumpRows.forEach(function (r) {
      String(r[KINDS] || '').split(',').forEach(function (kv) {
        var j = kv.lastIndexOf('=');
        if (j > 0) (kinds[kv.slice(0, j)] = kinds[kv.slice(0, j)] || []).push(x(r[T]) + ',' + y(Number(kv.slice(j + 1))));
      });
    });
    Object.keys(kinds).forEach(function (k) { line('rss-kind', kinds[k], '#ff7f0e', '3,3'); });
    line('own', dumpRows.map(function (r) { return x(r[T]) + ',' + y(r[OWN] || 0); }), '#555', '1,2');
    // Top stacks over the dumps.
    p.series.forEach(function (s, si) {
      var pts = [];
      s.bytes.forEach(function (b, di) { if (dumpT[di] !== undefined) pts.push(x(dumpT[di]) + ',' + y(b)); });
      line('series', pts, COLORS[si % COLORS.length]);
    });
    // Marks, labelled where there is room (else the dump's number alone).
    var lastLabel = -1e9;
    rows.forEach(function (r) {
      if (r[KIND] === 'dump' || r[KIND] === 'leak') {
        var mx = x(r[T]);
        svg.appendChild(sv('line', { 'class': 'mark ' + r[KIND], x1: mx, x2: mx, y1: TOP, y2: H - B, stroke: r[KIND] === 'dump' ? '#999' : '#d00', 'stroke-dasharray': '4,3' }));
        var label = r[KIND] === 'dump' ? 'dump ' + r[DUMP] : 'leak warning';
        if (mx - lastLabel < 7 * label.length) label = r[KIND] === 'dump' ? String(r[DUMP]).split(' ')[0] : '!';
        if (mx - lastLabel >= 7 * label.length) {
          svg.appendChild(sv('text', { x: mx + 3, y: TOP + 10 }, label));
          lastLabel = mx;
        }
      }
    });
    // One point per row, with its figures.
    rows.forEach(function (r) {
      var c = sv('circle', { 'class': 'row', cx: x(r[T]), cy: y(r[LIVE]), r: r[KIND] === 'tick' ? 1.5 : 3, fill: '#1f77b4' });
      c.appendChild(sv('title', {}, (r[T] / 1000).toFixed(3) + ' s: live ' + human(r[LIVE]) + ' (' + human(r[LOW]) + '..' + human(r[HIGH]) + '), allocated ' + human(r[ALLOC]) + (r[RSS] !== null ? ', RSS ' + human(r[RSS]) + ' (' + r[KINDS] + '), heaplive ' + human(r[OWN]) : '')));
      svg.appendChild(c);
    });
    return svg;
  }

  function legend(p) {
    var d = el('div', { 'class': 'legend' });
    [['live (95% band)', '#1f77b4'], ['RSS (kinds dashed)', '#ff7f0e'], ["heaplive's own", '#555']].forEach(function (l) {
      var s = el('span'); var i = el('i'); i.style.background = l[1]; s.appendChild(i); s.appendChild(document.createTextNode(l[0])); d.appendChild(s);
    });
    p.series.forEach(function (s, si) {
      var sp = el('span', { title: s.stack }); var i = el('i'); i.style.background = COLORS[si % COLORS.length];
      sp.appendChild(i); sp.appendChild(document.createTextNode(leaf(s.stack))); d.appendChild(sp);
    });
    return d;
  }

  // A stack's live bytes by size class (its `sizes`, [low, samples, bytes]
  // smallest first): a bar per class from its smallest to its largest,
  // heights by bytes, each bar's figures on hover.
  function sizeChart(sizes) {
    var H = 24, W = 132;
    function cls(low) { return low === 0 ? 0 : Math.round(Math.log(low) / Math.LN2) + 1; }
    var lo = cls(sizes[0][0]), hi = cls(sizes[sizes.length - 1][0]), n = hi - lo + 1, max = 0;
    sizes.forEach(function (c) { max = Math.max(max, c[2]); });
    var bw = Math.max(2, Math.min(12, Math.floor(W / n)));
    // Room for both end labels (about 40 px each at 9 px).
    var w = Math.max(bw * n, 84);
    var svg = sv('svg', { 'class': 'sizes', width: w, height: H + 11 });
    sizes.forEach(function (c) {
      var h = max > 0 ? Math.max(1, c[2] / max * H) : 1;
      var r = sv('rect', { 'class': 'size', 'data-low': c[0], 'data-samples': c[1], 'data-bytes': c[2],
        x: (cls(c[0]) - lo) * bw, y: H - h, width: Math.max(1, bw - 1), height: h, fill: '#1f77b4' });
      var range = c[0] === 0 ? '0 B' : human(c[0]) + ' to under ' + human(2 * c[0]);
      r.appendChild(sv('title', {}, range + ': ' + human(c[2]) + ' live in ' + c[1] + (c[1] === 1 ? ' sample' : ' samples')));
      svg.appendChild(r);
    });
    svg.appendChild(sv('text', { x: 0, y: H + 10, 'font-size': 9 }, human(sizes[0][0])));
    if (n > 1) svg.appendChild(sv('text', { x: w, y: H + 10, 'font-size': 9, 'text-anchor': 'end' }, human(sizes[sizes.length - 1][0])));
    return svg;
  }

  // The dump's freed blocks by lifetime (its samples file's lifetime
  // rows): per stack and class, [blocks, bytes, low, high].
  function lifetimes(rows) {
    var box = el('div');
    box.appendChild(el('h4', {}, 'Freed blocks by lifetime, since the start'));
    var t = table('top lifetimes', [['#', 'num'], ['freed <1 ms', 'num'], ['1 ms..1 s', 'num'], ['later', 'num'], ['temporary', 'num'], ['stack (innermost first)']]);
    function cell(x) {
      if (!x || !x[0] && !x[1]) return ['-', 'num'];
      return [human(x[1]) + (x[2] !== x[3] ? ' (' + human(x[2]) + '..' + human(x[3]) + ')' : '') + ', ' + x[0] + ' blocks', 'num'];
    }
    rows.slice(0, 30).forEach(function (r, i) {
      addRow(t, [[String(i + 1), 'num'], cell(r['1ms']), cell(r['1s']), cell(r.later), cell(r.temporary), [shortStack(r.stack), 'stack', r.stack]], r.stack);
    });
    box.appendChild(t);
    return box;
  }

  function dumpName(d) { return 'dump ' + d.n + ' (' + d.why + (d.t_ms !== undefined ? ', ' + (d.t_ms / 1000).toFixed(1) + ' s' : '') + ')'; }

  function topStacks(p, sec) {
    sec.appendChild(el('h3', {}, 'Top stacks of a dump'));
    var bar = el('div'); sec.appendChild(bar);
    var box = el('div'), fbox = el('div');
    sec.appendChild(box); sec.appendChild(fbox);
    // The view to show first: live, or the page's #view=NAME (a link to
    // the temporary view, say), when the dump has it.
    var di = p.dumps.length - 1, view = (location.hash.match(/view=(\w+)/) || [])[1] || 'live';
    function draw() {
      var d = p.dumps[di], v = d.views[view] || d.views.live;
      box.textContent = '';
      box.appendChild(el('div', { 'class': 'note' }, (view === 'temporary' ? 'Temporary allocations (freed before their thread\'s next allocation) since the start, ' : '') + d.file + ': ' + human(v.total) + ' in ' + v.stacks.length + ' stacks' + (v.others ? ' (and ' + human(v.others) + ' in smaller ones)' : '')));
      var shown = v.stacks.slice(0, 30);
      var withSizes = shown.some(function (s) { return s.sizes && s.sizes.length; });
      var heads = [['#', 'num'], ['bytes', 'num'], ['95% interval', 'num'], ['share', 'num']];
      if (withSizes) heads.push(['live bytes by block size']);

      var t = table('top', heads.concat([['stack (innermost first)']]));
      shown.forEach(function (s, i) {
        var cells = [[String(i + 1), 'num'], [human(s.bytes), 'num'], [s.low !== undefined ? human(s.low) + '..' + human(s.high) : '-', 'num'],
          [(v.total ? 100 * s.bytes / v.total : 0).toFixed(1) + '%', 'num']];
        if (withSizes) cells.push(s.sizes && s.sizes.length ? [sizeChart(s.sizes), 'sizes'] : ['-', 'sizes']);
        addRow(t, cells.concat([[shortStack(s.stack), 'stack', s.stack]]), s.stack);
      });
      box.appendChild(t);
      if (view === 'temporary' && d.lifetimes) box.appendChild(lifetimes(d.lifetimes));
      flame(fbox, d.flames[view], dumpName(d) + ', ' + view);
    }
    function views() { return Object.keys(p.dumps[di].views); }
    var vs = el('span');
    function viewSelect() {
      vs.textContent = '';
      var list = views();
      if (list.indexOf(view) < 0) view = 'live';
      vs.appendChild(select(list, list.indexOf(view), function (i) { view = list[i]; draw(); }));
    }
    bar.appendChild(select(p.dumps.map(dumpName), di, function (i) { di = i; viewSelect(); draw(); }));
    bar.appendChild(vs);
    viewSelect();
    draw();
  }

  function difference(p, sec) {
    if (p.dumps.length < 2) return;
    sec.appendChild(el('h3', {}, 'What changed between two dumps'));
    var bar = el('div'), box = el('div'), fbox = el('div');
    sec.appendChild(bar); sec.appendChild(box); sec.appendChild(fbox);
    var a = 0, b = p.dumps.length - 1;
    function draw() {
      var A = p.dumps[a].views.live, Bv = p.dumps[b].views.live, m = {};
      A.stacks.forEach(function (s) { m[s.stack] = [s.bytes, 0]; });
      Bv.stacks.forEach(function (s) { (m[s.stack] = m[s.stack] || [0, 0])[1] = s.bytes; });
      var rows = Object.keys(m).map(function (k) { return [k, m[k][0], m[k][1], m[k][1] - m[k][0]]; });
      rows.sort(function (x, y) { return Math.abs(y[3]) - Math.abs(x[3]); });
      box.textContent = '';
      box.appendChild(el('div', { 'class': 'note' }, 'total ' + human(A.total) + ' \u2192 ' + human(Bv.total) + ' (' + (Bv.total >= A.total ? '+' : '') + human(Bv.total - A.total) + ')'));
      var t = table('diff', [['change', 'num'], ['before', 'num'], ['after', 'num'], ['stack (innermost first)']]);
      rows.filter(function (r) { return r[3] !== 0; }).slice(0, 25).forEach(function (r) {
        addRow(t, [[(r[3] > 0 ? '+' : '') + human(r[3]), 'num ' + (r[3] > 0 ? 'grow' : 'shrink')], [human(r[1]), 'num'], [human(r[2]), 'num'], [shortStack(r[0]), 'stack', r[0]]], r[0]);
      });
      box.appendChild(t);
      var d = p.diffs.filter(function (x) { return x.from === a && x.to === b; })[0];
      flame(fbox, d && d.svg, 'dump ' + p.dumps[a].n + ' to dump ' + p.dumps[b].n + ' (differential: red grew, blue shrank)');
    }
    var names = p.dumps.map(dumpName);
    bar.appendChild(document.createTextNode('from '));
    bar.appendChild(select(names, a, function (i) { a = i; draw(); }));
    bar.appendChild(document.createTextNode(' to '));
    bar.appendChild(select(names, b, function (i) { b = i; draw(); }));
    draw();
  }

  function suspects(p, sec) {
    if (p.suspects.length === 0) return;
    sec.appendChild(el('h3', {}, 'Grew at every dump (leak suspects)'));
    var t = table('suspects', [['now', 'num'], ['at each dump', 'num'], ['stack (innermost first)']]);
    p.suspects.slice(0, 20).forEach(function (s) {
      addRow(t, [[human(s.bytes[s.bytes.length - 1]), 'num'], [s.bytes.map(human).join(' \u2192 '), 'num'], [shortStack(s.stack), 'stack', s.stack]], s.stack);
    });
    sec.appendChild(t);
  }

  function php(p, sec) {
    var ooms = p.dumps.filter(function (d) { return d.why === 'memory_limit'; });
    var peaks = p.request_peaks || [];
    if (p.endpoints.length === 0 && ooms.length === 0 && peaks.length === 0) return;
    sec.appendChild(el('h3', {}, 'PHP'));
    if (peaks.length > 0) {
      sec.appendChild(el('div', { 'class': 'note' }, 'Endpoints by peak (request-peak dumps, HEAPLIVE_PHP_PEAK_BYTES):'));
      var rp = table('request-peaks', [['highest', 'num'], ['mean', 'num'], ['requests', 'num'], ['request']]);
      peaks.forEach(function (e) { addRow(rp, [[human(e.highest), 'num'], [human(e.mean), 'num'], [String(e.requests), 'num'], [e.request]]); });
      sec.appendChild(rp);
    }
    if (p.endpoints.length > 0) {
      sec.appendChild(el('div', { 'class': 'note' }, 'Endpoints by bytes in the last dump (its peak view when it has one):'));
      var t = table('endpoints', [['bytes', 'num'], ['request']]);
      p.endpoints.forEach(function (e) { addRow(t, [[human(e.bytes), 'num'], [e.request]]); });
      sec.appendChild(t);
    }
    if (ooms.length > 0) sec.appendChild(el('div', {}, 'memory_limit dumps: ' + ooms.map(dumpName).join(', ')));
  }

  var data = JSON.parse(document.getElementById('heaplive-data').textContent);
  var root = document.getElementById('processes');
  if (data.processes.length > 1) {
    root.appendChild(el('div', { 'class': 'note' }, data.processes.length + ' processes: ' + data.processes.map(function (p) { return p.program + ' ' + p.pid; }).join(', ')));
  }
  data.processes.forEach(function (p) {
    var sec = el('section', { 'class': 'process', 'data-pid': String(p.pid) });
    sec.appendChild(el('h2', {}, p.program + ' (pid ' + p.pid + ')'));
    sec.appendChild(el('div', { 'class': 'note' }, p.dumps.length + ' dumps; ' + (p.interval ? (p.interval === 1 ? 'exact mode' : 'sample interval ' + human(p.interval)) : 'sample interval not recorded') + '; ' + p.timeline.rows.length + ' timeline rows'));
    sec.appendChild(el('h3', {}, 'Memory over time'));
    var c = chart(p);
    if (c) { sec.appendChild(c); sec.appendChild(legend(p)); } else sec.appendChild(el('div', { 'class': 'note' }, 'No timeline (NAME.timeline.tsv) beside these dumps.'));
    topStacks(p, sec);
    difference(p, sec);
    suspects(p, sec);
    php(p, sec);
    root.appendChild(sec);
  });
  document.body.setAttribute('data-drawn', 'yes');
})();
