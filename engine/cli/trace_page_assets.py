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
.lw-more,#lw-more,.lw-more-all{margin-left:6px;font-size:12px;cursor:pointer}.lw-cell b{overflow-wrap:anywhere}
.lw-diagram svg{max-width:100%;height:auto}.lw-diagram g.edge.lw-taken path{stroke:#d62728;stroke-width:2.5}
.lw-diagram g.edge.lw-current path{stroke:#ff9f00!important;stroke-width:6!important}
.lw-diagram g.edge.lw-current polygon{fill:#ff9f00;stroke:#ff9f00}.lw-diagram g.edge{cursor:pointer}
.lw-diagram g.node.lw-current path,.lw-diagram g.node.lw-current polygon{stroke:#ff9f00;stroke-width:4}
.lw-detail{white-space:pre-wrap;font:12px/1.35 ui-monospace,Menlo,Consolas,monospace;background:#f6f8fa;
padding:8px;border-radius:4px;max-height:40vh;overflow:auto;margin:0}
g.node.lw-has-runs{cursor:pointer}g.node.lw-has-runs path,g.node.lw-has-runs polygon{stroke-width:3}
g.node.lw-run-failed path,g.node.lw-run-failed polygon{stroke:#c00000!important;stroke-dasharray:6 3}
.lw-grid{display:grid;grid-template-columns:minmax(300px,46%) 1fr;gap:12px;padding:10px 0 4px}
.lw-summary{display:flex;flex-wrap:wrap;gap:4px 16px;font-size:13px}
details.lw-child{border:1px solid #ccd;border-left:4px solid #62b462;border-radius:5px;margin:6px 0;
padding:4px 8px;background:#fff}details.lw-child.lw-o-failed,details.lw-child.lw-o-limit,
details.lw-child.lw-o-cancelled,details.lw-child.lw-o-missing{border-left-color:#c00000}
details.lw-child.lw-o-suspended,details.lw-child.lw-o-running{border-left-color:#e0a800}
details.lw-child>summary{cursor:pointer;padding:3px 0}.lw-label{font-weight:600}.lw-where{color:#666}
details.lw-child code{font-size:12px;color:#555}.lw-o-failed>summary .lw-verdict,.lw-o-limit>summary .lw-verdict,
.lw-o-cancelled>summary .lw-verdict,.lw-o-missing>summary .lw-verdict,.lw-inside{color:#c00000;font-weight:600}
details.lw-child.lw-flash{outline:3px solid #ff9f00}.lw-runs{margin-left:6px}.lw-run-link{margin-right:6px}
.lw-run-link.lw-bad{color:#c00000;font-weight:600}.lw-run-bar{background:#62b462}
.lw-run-bar.lw-bad{background:#e06666}.lw-run-bar.lw-o-suspended{background:#ffd966}
"""

SCRIPT = """
(function () {
  const texts = JSON.parse(document.getElementById('lw-texts').textContent);
  const cap = Number(document.body.dataset.textCap);
  const root = document.querySelector('main.lw-run');
  // each run's events: the page's run, and every child run of a workflow (its panel's view)
  const runs = JSON.parse(document.getElementById('lw-children').textContent);
  runs[root.dataset.run] = JSON.parse(document.getElementById('lw-events').textContent);
  const views = new Map();
  function view(el) {
    let v = views.get(el);
    if (!v) {
      const events = runs[el.dataset.run] || [];
      v = {el: el, events: events, bySeq: new Map(events.map(e => [e.seq, e]))};
      views.set(el, v);
    }
    return v;
  }
  // the elements of a view that are its own (not those of the child views inside it)
  const own = (el, sel) => Array.from(el.querySelectorAll(sel)).filter(n => n.closest('.lw-run') === el);
  const one = (el, sel) => own(el, sel)[0] || null;
  let active = view(root);
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
  function show(v, e, whole) {
    const cut = [];
    const detail = one(v.el, '.lw-detail');
    const more = one(v.el, '.lw-more-all');
    detail.textContent = JSON.stringify(expand(e, whole, cut), null, 2);
    more.hidden = cut.length === 0;
    const total = cut.reduce((a, b) => a + b, 0);
    more.textContent = 'show all (' + total.toLocaleString() + ' characters)';
  }
  function mark(v, seq, quiet) {
    const e = v.bySeq.get(seq);
    if (!e) return;
    active = v;
    own(v.el, '.lw-selected').forEach(n => n.classList.remove('lw-selected'));
    own(v.el, '[data-seq="' + seq + '"]').forEach(n => n.classList.add('lw-selected'));
    const diagram = one(v.el, '.lw-diagram');
    if (diagram) {
      diagram.querySelectorAll('.lw-current').forEach(n => n.classList.remove('lw-current'));
      const find = (kind, key, value) =>
        diagram.querySelector('g.' + kind + '[' + key + '="' + CSS.escape(value) + '"]');
      let target = null;
      if (e.type === 'state_entered') target = find('edge', 'data-edge', e.source + '->' + e.state);
      if (!target) target = find('node', 'data-state', e.state);
      if (target) target.classList.add('lw-current');
    }
    show(v, e, false);
    one(v.el, '.lw-detail').dataset.seq = String(seq);
    const row = one(v.el, 'tr.lw-step[data-seq="' + seq + '"]');
    if (!quiet && row && row.scrollIntoView) row.scrollIntoView({block: 'nearest'});
  }
  // a child run's panel: opened (and the panels it sits in), brought into view
  function openRun(id) {
    const panel = document.getElementById('lw-run-' + id);
    if (!panel) return null;
    for (let p = panel; p; p = p.parentElement && p.parentElement.closest('details.lw-child')) p.open = true;
    document.querySelectorAll('.lw-flash').forEach(n => n.classList.remove('lw-flash'));
    panel.classList.add('lw-flash');
    if (panel.scrollIntoView) panel.scrollIntoView({block: 'start'});
    const inner = panel.querySelector('.lw-run');
    if (inner) active = view(inner);
    return panel;
  }
  // the runs a workflow's state ran: their panels opened, the first (a failed one if any) shown
  function openState(v, state) {
    const panels = own(v.el, 'details.lw-child').filter(d => d.dataset.state === state);
    panels.forEach(d => { d.open = true; });
    const first = panels.find(d => d.classList.contains('lw-o-failed')) || panels[0];
    if (first) openRun(first.dataset.run);
  }
  document.addEventListener('click', function (ev) {
    const whole = ev.target.closest('button.lw-more[data-text]');
    if (whole) {
      whole.previousElementSibling.textContent = texts[Number(whole.dataset.text)];
      whole.remove();
      return;
    }
    const link = ev.target.closest('a.lw-run-link, .lw-run-bar[data-run]');
    if (link) { ev.preventDefault(); openRun(link.dataset.run); return; }
    const el = ev.target.closest('.lw-run');
    if (!el) return;
    const v = view(el);
    const more = ev.target.closest('.lw-more-all');
    if (more) {
      const e = v.bySeq.get(Number(one(el, '.lw-detail').dataset.seq));
      if (e) show(v, e, true);
      return;
    }
    const step = ev.target.closest('.lw-step');
    if (step) { mark(v, Number(step.dataset.seq)); return; }
    const node = ev.target.closest('g.node.lw-has-runs[data-state]');
    if (node) { openState(v, node.dataset.state); return; }
    const edge = ev.target.closest('g.edge[data-edge]');
    if (edge) {
      const [source, dest] = edge.dataset.edge.split('->');
      const first = v.events.find(e => e.type === 'state_entered' && e.source === source && e.state === dest);
      if (first) mark(v, first.seq);
    }
  });
  document.addEventListener('keydown', function (ev) {
    const v = active;
    if (!v.events.length) return;
    const now = Number(one(v.el, '.lw-detail').dataset.seq || 0);
    const i = v.events.findIndex(e => e.seq === now);
    if (ev.key === 'ArrowDown' || ev.key === 'j') mark(v, v.events[Math.min(i + 1, v.events.length - 1)].seq);
    if (ev.key === 'ArrowUp' || ev.key === 'k') mark(v, v.events[Math.max(i - 1, 0)].seq);
  });
  // a child that did not answer: its error (or its last event) shown, its state marked
  document.querySelectorAll('details.lw-child:is(.lw-o-failed,.lw-o-limit,.lw-o-cancelled) > .lw-run').forEach(el => {
    const v = view(el);
    const error = v.events.filter(e => e.type === 'error_occurred').pop() || v.events[v.events.length - 1];
    if (error) mark(v, error.seq, true);
  });
  active = view(root);
  if (location.hash.startsWith('#lw-run-')) openRun(decodeURIComponent(location.hash.slice(8)));
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
<main class="lw-run" data-run="{run}">
<section id="lw-diagram" class="lw-diagram"><h2>The machine, and the path the run took</h2>{drawing}</section>
<section><h2>Selected step</h2>
<pre id="lw-detail" class="lw-detail">Click a step (a row, a bar, an edge) to see its event.</pre>
<button id="lw-more" class="lw-more-all" hidden></button>
<h2 style="margin-top:12px">Timeline</h2><div id="lw-timeline">{timeline}</div></section>
<section class="lw-wide"><h2>Events</h2><table id="lw-table">{head}<tbody>{table}</tbody></table></section>
{children}
</main>
<script type="application/json" id="lw-events">{events}</script>
<script type="application/json" id="lw-children">{runs}</script>
<script type="application/json" id="lw-texts">{texts}</script>
<script>{script}</script>
</body>
</html>
"""
