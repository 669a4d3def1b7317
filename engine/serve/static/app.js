// loopwright's dev UI: chat with an agent, watch its machine light up, approve its calls, browse runs.
// Plain JS, no build step, nothing fetched from elsewhere: every URL is relative to the page (the app may be mounted).
(function () {
  'use strict';
  const $ = (id) => document.getElementById(id);
  const state = { agent: null, agents: [], edits: false, runId: null, stream: null, last: 0, shown: new Set() };

  // A server started with --token-env: open the UI at /#token=<token>; the token is kept for this tab
  // (sessionStorage), taken out of the address bar, and sent as a bearer token with every request.
  const token = (function () {
    const found = /(?:^#|&)token=([^&]+)/.exec(location.hash);
    if (found) {
      sessionStorage.setItem('loopwright-token', decodeURIComponent(found[1]));
      history.replaceState(null, '', location.pathname + location.search);
    }
    return sessionStorage.getItem('loopwright-token');
  })();
  const signed = (headers) => (token ? Object.assign({ Authorization: 'Bearer ' + token }, headers) : headers);

  async function api(method, path, body) {
    // every body is JSON, sent as application/json: the server refuses any other (a CSRF defence)
    const response = await fetch(path, {
      method,
      headers: signed(body === undefined ? {} : { 'Content-Type': 'application/json' }),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const data = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(data.error || response.statusText);
    return data;
  }

  function say(kind, text) {
    const div = document.createElement('div');
    div.className = 'msg ' + kind;
    div.textContent = text;
    $('messages').appendChild(div);
    $('messages').scrollTop = $('messages').scrollHeight;
    return div;
  }

  // ------------------------------------------------------------------ agents and the diagram

  async function loadAgents() {
    const data = await api('GET', 'agents');
    state.agents = data.agents;
    state.edits = data.approve_takes_args;
    const nav = $('agents');
    nav.textContent = '';
    for (const name of data.agents) {
      const b = document.createElement('button');
      b.type = 'button';
      b.textContent = name;
      b.dataset.agent = name;
      b.addEventListener('click', () => chooseAgent(name));
      nav.appendChild(b);
      const o = document.createElement('option');
      o.textContent = name;
      $('runs-agent').appendChild(o);
    }
    await chooseAgent(data.agents[0]);
  }

  async function chooseAgent(name) {
    state.agent = name;
    $('agent-name').textContent = name;
    document.querySelectorAll('#agents button').forEach((b) => b.classList.toggle('active', b.dataset.agent === name));
    const box = $('diagram');
    const response = await fetch('agents/' + encodeURIComponent(name) + '/diagram.svg', { headers: signed({}) });
    if (response.ok) {
      box.innerHTML = await response.text();
      // the trace page's marks: each edge and state of the drawing named by its Graphviz title
      box.querySelectorAll('g.edge').forEach((g) => { g.dataset.edge = g.querySelector('title').textContent; });
      box.querySelectorAll('g.node').forEach((g) => { g.dataset.state = g.querySelector('title').textContent; });
    } else {
      box.textContent = (await response.json().catch(() => ({}))).error || 'no drawing';
    }
    document.body.dataset.diagram = 'ready';
  }

  function clearDiagram() {
    $('diagram').querySelectorAll('.lw-taken,.lw-visited,.lw-current').forEach((n) => {
      n.classList.remove('lw-taken', 'lw-visited', 'lw-current');
    });
  }

  function light(e) {
    const box = $('diagram');
    const find = (kind, key, value) => box.querySelector('g.' + kind + '[' + key + '="' + CSS.escape(value) + '"]');
    box.querySelectorAll('.lw-current').forEach((n) => n.classList.remove('lw-current'));
    const edge = find('edge', 'data-edge', e.source + '->' + e.state);
    if (edge) edge.classList.add('lw-taken', 'lw-current');
    for (const s of [e.source, e.state]) {
      const node = find('node', 'data-state', s);
      if (node) node.classList.add('lw-visited');
    }
  }

  // ------------------------------------------------------------------ following a run (SSE over fetch)

  async function follow(runId) {
    if (state.stream) state.stream.abort();
    const controller = new AbortController();
    state.stream = controller;
    state.runId = runId;
    state.last = 0;
    $('timeline').textContent = '';
    $('approvals').textContent = '';
    clearDiagram();
    $('run-controls').hidden = false;
    $('run-id').textContent = runId.slice(0, 12);
    $('trace-link').href = 'runs/' + encodeURIComponent(runId) + '/trace';
    $('run-outcome').textContent = 'running';
    for (let attempt = 0; attempt < 50 && !controller.signal.aborted; attempt++) {
      try {
        const ended = await read(runId, controller);
        if (ended) return;
      } catch (err) {
        if (controller.signal.aborted) return;
      }
      await new Promise((r) => setTimeout(r, 500)); // the stream broke (or we were dropped): resume from the last id
    }
  }

  async function read(runId, controller) {
    const response = await fetch('runs/' + encodeURIComponent(runId) + '/events', {
      headers: signed({ 'Last-Event-ID': String(state.last) }),
      signal: controller.signal,
    });
    if (!response.ok) throw new Error('stream ' + response.status);
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return false;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const fields = { event: 'message', data: '', id: null };
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) continue;
          const at = line.indexOf(':');
          const key = line.slice(0, at);
          const val = line.slice(at + 1).replace(/^ /, '');
          if (key === 'data') fields.data += val; else fields[key] = val;
        }
        if (fields.event === 'end') { $('status').textContent = ''; return true; }
        if (fields.event === 'dropped') return false;
        if (!fields.data) continue;
        if (fields.id !== null) state.last = Number(fields.id);
        onEvent(fields.event, JSON.parse(fields.data));
      }
    }
  }

  function onEvent(type, e) {
    if (e.seq !== undefined) {
      if (state.shown.has(e.run_id + ':' + e.seq)) return;
      state.shown.add(e.run_id + ':' + e.seq);
    }
    const li = document.createElement('li');
    li.className = 't-' + type;
    li.value = e.seq || 0;
    const t = document.createElement('span');
    t.className = 'type';
    t.textContent = type;
    li.appendChild(t);
    li.appendChild(document.createTextNode(describe(type, e)));
    $('timeline').appendChild(li);
    $('timeline').scrollTop = $('timeline').scrollHeight;
    if (type === 'run_started') say('user', typeof e.input === 'string' ? e.input : JSON.stringify(e.input));
    if (type === 'state_entered') light(e);
    if (type === 'model_responded') {
      const text = (e.response.parts || []).filter((p) => p.type === 'text').map((p) => p.text).join('');
      if (text) say('assistant', text);
    }
    if (type === 'tool_called') say('tool', '→ ' + e.name + '(' + JSON.stringify(e.args) + ')');
    if (type === 'tool_answered') say('tool', '← ' + e.name + ': ' + JSON.stringify(e.content));
    if (type === 'suspended') { ask(e.pending); $('run-outcome').textContent = 'waiting for you'; refreshRuns(); }
    if (type === 'resumed') $('approvals').textContent = '';
    if (type === 'paused') $('run-outcome').textContent = 'paused';
    if (type === 'run_finished') {
      $('run-outcome').textContent = e.outcome;
      if (e.error) say('error', e.outcome + ': ' + e.error.message);
      document.body.dataset.finished = e.outcome;
      refreshRuns();
    }
    if (type === 'error') say('error', e.message);
  }

  function describe(type, e) {
    if (type === 'state_entered') return e.source + ' → ' + e.state + ' (' + e.guard + ')';
    if (type === 'tool_called') return e.name + ' ' + JSON.stringify(e.args);
    if (type === 'run_finished') return e.outcome + (e.output ? ': ' + e.output : '');
    if (type === 'suspended') return e.pending.map((p) => p.kind + ' for ' + p.tool).join(', ');
    return '';
  }

  // ------------------------------------------------------------------ approvals

  function ask(pending) {
    const box = $('approvals');
    box.textContent = '';
    for (const p of pending) {
      const card = document.createElement('div');
      card.className = 'approval';
      card.dataset.call = p.call_id;
      const title = document.createElement('div');
      title.innerHTML = '<b></b> <span class="muted"></span>';
      title.querySelector('b').textContent = p.tool;
      title.querySelector('span').textContent = p.detail || p.kind;
      card.appendChild(title);
      const args = document.createElement(state.edits ? 'textarea' : 'pre');
      args.className = 'args';
      args.rows = 3;
      args[state.edits ? 'value' : 'textContent'] = JSON.stringify(p.args, null, 2);
      card.appendChild(args);
      const note = document.createElement('div');
      note.className = 'note';
      if (p.kind === 'confirmation') {
        card.appendChild(button('Approve', 'approve', () => decide(p, 'approve', card)));
        card.appendChild(button('Deny', 'deny', () => decide(p, 'deny', card)));
      } else {
        const value = document.createElement('input');
        value.placeholder = p.kind;
        card.appendChild(value);
        card.appendChild(button('Send', 'approve', () => decide(p, 'value', card, value.value)));
      }
      card.appendChild(note);
      box.appendChild(card);
    }
  }

  function button(text, cls, onclick) {
    const b = document.createElement('button');
    b.type = 'button';
    b.textContent = text;
    b.className = cls;
    b.addEventListener('click', onclick);
    return b;
  }

  async function decide(p, action, card, value) {
    const decision = { call_id: p.call_id, action };
    if (action === 'deny') decision.reason = 'denied in the dev UI';
    if (action === 'value') decision.value = value;
    if (action === 'approve' && state.edits) {
      const edited = card.querySelector('textarea.args').value;
      if (edited.trim() !== JSON.stringify(p.args, null, 2).trim()) {
        try { decision.args = JSON.parse(edited); } catch (err) {
          card.querySelector('.note').textContent = 'the arguments are not JSON: ' + err.message;
          return;
        }
      }
    }
    try {
      await api('POST', 'runs/' + encodeURIComponent(state.runId) + '/decisions', { decisions: [decision] });
      card.remove();
    } catch (err) {
      card.querySelector('.note').textContent = err.message;
    }
  }

  // ------------------------------------------------------------------ chat, controls, runs

  $('chat-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const input = $('chat-input');
    const text = input.value.trim();
    if (!text) return;
    input.value = '';
    $('messages').textContent = '';
    state.shown.clear();
    delete document.body.dataset.finished;
    try {
      const started = await api('POST', 'runs', { agent: state.agent, input: text });
      follow(started.run_id);
    } catch (err) {
      say('error', err.message);
    }
  });
  $('chat-input').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey) { ev.preventDefault(); $('chat-form').requestSubmit(); }
  });
  for (const action of ['pause', 'resume', 'cancel']) {
    $(action).addEventListener('click', async () => {
      try {
        await api('POST', 'runs/' + encodeURIComponent(state.runId) + '/' + action);
        if (action === 'resume') follow(state.runId);
      } catch (err) { $('status').textContent = err.message; }
    });
  }

  async function refreshRuns() {
    const q = new URLSearchParams();
    if ($('runs-agent').value) q.set('agent', $('runs-agent').value);
    if ($('runs-outcome').value) q.set('outcome', $('runs-outcome').value);
    if ($('runs-since').value) q.set('since', String(Date.parse($('runs-since').value) / 1000));
    if ($('runs-until').value) q.set('until', String(Date.parse($('runs-until').value) / 1000 + 86400));
    const data = await api('GET', 'runs?' + q.toString());
    const body = $('runs').querySelector('tbody');
    body.textContent = '';
    for (const r of data.runs) {
      const tr = document.createElement('tr');
      tr.dataset.run = r.run_id;
      const cells = [r.run_id.slice(0, 12), r.agent, r.outcome || 'running', r.stage, new Date(r.updated * 1000).toLocaleString()];
      for (const c of cells) {
        const td = document.createElement('td');
        td.textContent = c;
        tr.appendChild(td);
      }
      tr.children[2].className = 'outcome-' + (r.outcome || 'running');
      const link = document.createElement('a');
      link.href = 'runs/' + encodeURIComponent(r.run_id) + '/trace';
      link.target = '_blank';
      link.textContent = 'trace';
      const td = document.createElement('td');
      td.appendChild(link);
      tr.appendChild(td);
      tr.addEventListener('click', async (ev) => {
        if (ev.target.tagName === 'A') return;
        if (r.agent !== state.agent && state.agents.includes(r.agent)) await chooseAgent(r.agent);
        $('messages').textContent = '';
        state.shown.clear();
        follow(r.run_id);
      });
      body.appendChild(tr);
    }
  }
  $('runs-form').addEventListener('submit', (ev) => { ev.preventDefault(); refreshRuns(); });

  loadAgents().then(refreshRuns).then(() => { document.body.dataset.ready = 'yes'; })
    .catch((err) => { $('status').textContent = err.message; });
})();
