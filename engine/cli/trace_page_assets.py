"""The trace page's fixed parts: its HTML skeleton (:data:`PAGE`, filled by
:func:`~loopwright.cli.trace_page.trace_page`), its styles and its script, all inlined into
the page so it fetches nothing when it is viewed."""

STYLE = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;color:#1d1d1f;
background:#fafafa}
header{padding:12px 20px;background:#12263a;color:#fff}header h1{font-size:17px;margin:0 0 8px}
#lw-summary{display:flex;flex-wrap:wrap;gap:6px 18px}.lw-cell span{opacity:.7;margin-right:6px}
.lw-cell b{font-weight:600}main{display:grid;grid-template-columns:minmax(320px,46%) 1fr;gap:16px;padding:16px}
section{background:#fff;border:1px solid #ddd;border-radius:6px;padding:10px;overflow:auto}
h2{font-size:14px;margin:0 0 8px}#lw-diagram svg{max-width:100%;height:auto}
#lw-diagram g.edge.lw-taken path{stroke:#d62728;stroke-width:2.5}
#lw-diagram g.edge.lw-current path{stroke:#ff9f00!important;stroke-width:6!important}
#lw-diagram g.edge.lw-current polygon{fill:#ff9f00;stroke:#ff9f00}
#lw-diagram g.node.lw-current path,#lw-diagram g.node.lw-current polygon{stroke:#ff9f00;stroke-width:4}
#lw-diagram g.edge{cursor:pointer}
.lw-lane{display:flex;align-items:center;margin:3px 0}.lw-lane-name{width:120px;font-size:12px;color:#555;
overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.lw-track{position:relative;flex:1;height:22px;background:#f0f0f0;border-radius:3px}
.lw-bar{position:absolute;top:2px;height:18px;font-size:11px;line-height:18px;overflow:hidden;white-space:nowrap;
border-radius:3px;background:#8fb3d9;color:#000;cursor:pointer;padding:0 2px;box-sizing:border-box;
border-right:1px solid #fff}
.lw-s-reason{background:#c6a5e8}.lw-s-act{background:#9fd49f}.lw-s-done,.lw-s-failed,.lw-s-cancelled{background:#999}
.lw-s-salvage{background:#f1c27d}.lw-s-transfer{background:#7fd1d1}.lw-s-suspended{background:#ffe38a}
.lw-tool.lw-ok{background:#62b462}.lw-tool.lw-error{background:#e06666}.lw-tool.lw-open{background:#ffd966}
.lw-step.lw-selected{outline:2px solid #ff9f00}
table{border-collapse:collapse;width:100%;font-size:12px}td{padding:2px 6px;border-bottom:1px solid #eee;
vertical-align:top}tr.lw-step{cursor:pointer}tr.lw-step:hover{background:#f5f9ff}tr.lw-selected{background:#fff1d6}
tr.lw-t-state_entered td:nth-child(5){color:#1f5fbf}tr.lw-t-error_occurred td,tr.lw-t-run_finished td{font-weight:600}
#lw-detail{white-space:pre-wrap;font:12px/1.35 ui-monospace,Menlo,Consolas,monospace;background:#f6f8fa;
padding:8px;border-radius:4px;max-height:40vh;overflow:auto;margin:0}
.lw-wide{grid-column:1/-1}.lw-note{color:#8a5a00}
.lw-more,#lw-more{margin-left:6px;font-size:12px;cursor:pointer}.lw-cell b{overflow-wrap:anywhere}
"""

SCRIPT = """
(function () {
  const events = JSON.parse(document.getElementById('lw-events').textContent);
  const texts = JSON.parse(document.getElementById('lw-texts').textContent);
  const cap = Number(document.body.dataset.textCap);
  const bySeq = new Map(events.map(e => [e.seq, e]));
  const diagram = document.getElementById('lw-diagram');
  const detail = document.getElementById('lw-detail');
  const more = document.getElementById('lw-more');
  // an event as it was: each long text put back (whole, or cut to `cap` and counted in `cut`)
  function expand(v, whole, cut) {
    if (Array.isArray(v)) return v.map(x => expand(x, whole, cut));
    if (v === null || typeof v !== 'object') return v;
    const keys = Object.keys(v);
    if (keys.length === 1 && keys[0] === '$lw_text') {
      const text = texts[v.$lw_text];
      if (whole) return text;
      cut.push(text.length);
      return text.slice(0, cap) + '… [' + (text.length - cap).toLocaleString() + ' more characters]';
    }
    const out = {};
    for (const k of keys) out[k] = expand(v[k], whole, cut);
    return out;
  }
  function show(e, whole) {
    const cut = [];
    detail.textContent = JSON.stringify(expand(e, whole, cut), null, 2);
    more.hidden = cut.length === 0;
    const total = cut.reduce((a, b) => a + b, 0);
    more.textContent = 'show all (' + total.toLocaleString() + ' characters)';
  }
  function mark(seq) {
    const e = bySeq.get(seq);
    if (!e) return;
    document.querySelectorAll('.lw-selected').forEach(n => n.classList.remove('lw-selected'));
    document.querySelectorAll('[data-seq="' + seq + '"]').forEach(n => n.classList.add('lw-selected'));
    diagram.querySelectorAll('.lw-current').forEach(n => n.classList.remove('lw-current'));
    let target = null;
    const find = (kind, key, value) => diagram.querySelector('g.' + kind + '[' + key + '="' + CSS.escape(value) + '"]');
    if (e.type === 'state_entered') target = find('edge', 'data-edge', e.source + '->' + e.state);
    if (!target) target = find('node', 'data-state', e.state);
    if (target) target.classList.add('lw-current');
    show(e, false);
    detail.dataset.seq = String(seq);
    const row = document.querySelector('tr.lw-step[data-seq="' + seq + '"]');
    if (row && row.scrollIntoView) row.scrollIntoView({block: 'nearest'});
  }
  more.addEventListener('click', function () {
    const e = bySeq.get(Number(detail.dataset.seq));
    if (e) show(e, true);
  });
  document.addEventListener('click', function (ev) {
    const whole = ev.target.closest('button.lw-more[data-text]');
    if (whole) {
      whole.previousElementSibling.textContent = texts[Number(whole.dataset.text)];
      whole.remove();
      return;
    }
    const step = ev.target.closest('.lw-step');
    if (step) { mark(Number(step.dataset.seq)); return; }
    const edge = ev.target.closest('g.edge[data-edge]');
    if (edge) {
      const [source, dest] = edge.dataset.edge.split('->');
      const first = events.find(e => e.type === 'state_entered' && e.source === source && e.state === dest);
      if (first) mark(first.seq);
    }
  });
  document.addEventListener('keydown', function (ev) {
    const now = Number(detail.dataset.seq || 0);
    const i = events.findIndex(e => e.seq === now);
    if (ev.key === 'ArrowDown' || ev.key === 'j') mark(events[Math.min(i + 1, events.length - 1)].seq);
    if (ev.key === 'ArrowUp' || ev.key === 'k') mark(events[Math.max(i - 1, 0)].seq);
  });
  document.body.dataset.ready = 'yes';
})();
"""

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; \
script-src 'unsafe-inline'; img-src data:">
<title>{title}</title>
<style>{style}</style>
</head>
<body data-text-cap="{cap}">
<header><h1>{title}</h1><div id="lw-summary">{summary}</div></header>
<main>
<section id="lw-diagram"><h2>The machine, and the path the run took</h2>{drawing}</section>
<section><h2>Selected step</h2><pre id="lw-detail">Click a step (a row, a bar, an edge) to see its event.</pre>
<button id="lw-more" hidden></button>
<h2 style="margin-top:12px">Timeline</h2><div id="lw-timeline">{timeline}</div></section>
<section class="lw-wide"><h2>Events</h2><table id="lw-table"><thead><tr><th>seq</th><th>t (s)</th><th>agent</th>
<th>iter</th><th>event</th><th>what</th></tr></thead><tbody>{table}</tbody></table></section>
</main>
<script type="application/json" id="lw-events">{events}</script>
<script type="application/json" id="lw-texts">{texts}</script>
<script>{script}</script>
</body>
</html>
"""
