// squidbot web UI: a single page speaking the gateway's WebSocket protocol, no dependencies.
// Server data only ever reaches the page as text nodes (never as markup).
'use strict';

const AUTH_KEY = 'squidbot.auth';
const DEFAULT_SESSION = 'agent:main:main';
const REQUEST_TIMEOUT_MS = 30000;
const MAX_BACKOFF_MS = 30000;

const $ = (id) => document.getElementById(id);

// Builds an element; string children become text nodes, so nothing is parsed as HTML.
function h(tag, attributes, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on')) element.addEventListener(name.slice(2), value);
    else if (name === 'class') element.className = value;
    else element.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : String(child));
  }
  return element;
}

function show(element, text) {
  element.textContent = text || '';
  element.hidden = !text;
}

function newId() {
  if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
  return Date.now().toString(36) + Math.random().toString(36).slice(2);
}

function formatTime(value) {
  if (value === undefined || value === null || value === '') return '—';
  let date;
  if (typeof value === 'number') date = new Date(value < 1e12 ? value * 1000 : value);
  else date = new Date(value);
  return Number.isNaN(date.getTime()) ? String(value) : date.toLocaleString();
}

function formatDuration(milliseconds) {
  let seconds = Math.floor((Number(milliseconds) || 0) / 1000);
  const parts = [];
  for (const [unit, size] of [['d', 86400], ['h', 3600], ['m', 60]]) {
    if (seconds >= size || parts.length) parts.push(Math.floor(seconds / size) + unit);
    seconds %= size;
  }
  parts.push(seconds + 's');
  return parts.join(' ');
}

const THINKING_PARTS = new Set(['thinking', 'reasoning']);

// Message content is either a string or a list of typed parts; thinking parts are not text.
function contentText(content) {
  if (content === undefined || content === null) return '';
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content.map((part) => {
      if (typeof part === 'string') return part;
      if (part && THINKING_PARTS.has(part.type)) return '';
      if (part && typeof part.text === 'string') return part.text;
      return part && part.type ? '[' + part.type + ']' : '';
    }).join('');
  }
  if (typeof content.text === 'string') return content.text;
  return JSON.stringify(content);
}

// A message's reasoning: a `thinking` field or thinking parts of its content. The gateway
// sends none today; the page is ready for providers that share it.
function messageThinking(message) {
  if (!message) return '';
  if (typeof message.thinking === 'string') return message.thinking;
  if (!Array.isArray(message.content)) return '';
  return message.content.filter((part) => part && THINKING_PARTS.has(part.type))
    .map((part) => part.thinking ?? part.text ?? '').join('');
}

function usageText(usage) {
  if (!usage) return '';
  const input = usage.inputTokens ?? usage.input;
  const output = usage.outputTokens ?? usage.output;
  if (input === undefined && output === undefined) return '';
  return (input ?? 0) + ' in / ' + (output ?? 0) + ' out tokens';
}

// connection

class GatewayError extends Error {
  constructor(code, message, details) {
    super(message || code);
    this.code = code;
    this.details = details || {};
  }
}

const connection = {
  socket: null,
  authenticated: false,
  wanted: false,
  everConnected: false,
  attempt: 0,
  retryTimer: null,
  nextId: 1,
  pending: new Map(),
  hello: null,
};

function loadAuth() {
  try {
    const stored = JSON.parse(sessionStorage.getItem(AUTH_KEY) || 'null');
    return stored && stored.secret ? stored : null;
  } catch {
    return null;
  }
}

function setConnectionState(state, text) {
  const indicator = $('conn-state');
  indicator.dataset.state = state;
  indicator.textContent = text;
  show($('login-status'), state === 'idle' ? '' : text);
}

function connect() {
  clearTimeout(connection.retryTimer);
  const url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/';
  setConnectionState('connecting', 'connecting…');
  const socket = new WebSocket(url);
  connection.socket = socket;
  let challenged = false;
  // Older gateways may not send a challenge; don't wait for one forever.
  const fallback = setTimeout(() => { if (!challenged) { challenged = true; sendConnect(socket); } }, 3000);
  socket.onmessage = (message) => {
    let frame;
    try { frame = JSON.parse(message.data); } catch { return; }
    if (frame.type === 'event' && frame.event === 'connect.challenge') {
      if (!challenged) { challenged = true; clearTimeout(fallback); sendConnect(socket); }
      return;
    }
    handleFrame(frame);
  };
  socket.onclose = (event) => {
    clearTimeout(fallback);
    if (connection.socket !== socket) return;
    const wasAuthenticated = connection.authenticated;
    connection.socket = null;
    connection.authenticated = false;
    failPending('the connection closed');
    chatDisconnected();
    if (!wasAuthenticated && event.code === 1008) {
      loginFailed(event.reason || 'the gateway refused the connection', true);
      return;
    }
    if (connection.wanted) scheduleReconnect();
    else setConnectionState('idle', 'not connected');
  };
}

function scheduleReconnect() {
  const delay = Math.min(MAX_BACKOFF_MS, 1000 * 2 ** connection.attempt) + Math.floor(Math.random() * 300);
  connection.attempt += 1;
  setConnectionState('reconnecting', 'disconnected, retrying in ' + Math.round(delay / 1000) + ' s');
  connection.retryTimer = setTimeout(connect, delay);
}

function failPending(reason) {
  for (const entry of connection.pending.values()) {
    clearTimeout(entry.timer);
    entry.reject(new GatewayError('DISCONNECTED', reason));
  }
  connection.pending.clear();
}

function rawRequest(socket, method, params, timeout = REQUEST_TIMEOUT_MS) {
  const id = String(connection.nextId++);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      connection.pending.delete(id);
      reject(new GatewayError('TIMEOUT', method + ' got no answer in time'));
    }, timeout);
    connection.pending.set(id, { resolve, reject, timer });
    try {
      socket.send(JSON.stringify({ type: 'req', id, method, params: params || {} }));
    } catch (error) {
      clearTimeout(timer);
      connection.pending.delete(id);
      reject(new GatewayError('DISCONNECTED', String(error.message || error)));
    }
  });
}

function request(method, params) {
  if (!connection.socket || !connection.authenticated) {
    return Promise.reject(new GatewayError('DISCONNECTED', 'not connected to the gateway'));
  }
  return rawRequest(connection.socket, method, params);
}

function handleFrame(frame) {
  if (frame.type === 'res') {
    const entry = connection.pending.get(String(frame.id));
    if (!entry) return;
    connection.pending.delete(String(frame.id));
    clearTimeout(entry.timer);
    if (frame.ok) entry.resolve(frame.payload || {});
    else {
      const error = frame.error || {};
      entry.reject(new GatewayError(error.code || 'ERROR', error.message, error.details));
    }
  } else if (frame.type === 'event') {
    const payload = frame.payload || {};
    if (frame.event === 'chat') onChatEvent(payload);
    else if (frame.event === 'agent') onAgentEvent(payload);
    // tick, presence and other events carry nothing this page shows.
  }
}

async function sendConnect(socket) {
  const auth = loadAuth();
  if (!auth) { connection.wanted = false; socket.close(); showLogin(''); return; }
  const params = {
    minProtocol: 3,
    maxProtocol: 4,
    client: { id: 'webchat', version: 'squidbot-ui', platform: 'web', mode: 'webchat' },
    role: 'operator',
    scopes: ['operator.read', 'operator.write', 'operator.admin'],
    auth: auth.mode === 'password' ? { password: auth.secret } : { token: auth.secret },
  };
  try {
    const hello = await rawRequest(socket, 'connect', params, 15000);
    if (connection.socket !== socket) return;
    connection.authenticated = true;
    connection.everConnected = true;
    connection.attempt = 0;
    connection.hello = hello;
    const version = hello.server && hello.server.version;
    setConnectionState('connected', 'connected' + (version ? ' · v' + version : ''));
    showApp();
  } catch (error) {
    if (connection.socket !== socket) return;
    if (error.code === 'UNAVAILABLE' || error.code === 'TIMEOUT' || error.code === 'DISCONNECTED') {
      socket.close();
      return;
    }
    const detail = (error.details && error.details.code) || '';
    const rejected = detail.startsWith('AUTH_') || error.code === 'FORBIDDEN' || error.code === 'INVALID_REQUEST';
    connection.socket = null; // so the close that follows doesn't overwrite this message
    socket.close();
    loginFailed(describeLoginError(error), rejected);
  }
}

function describeLoginError(error) {
  const detail = (error.details && error.details.code) || '';
  if (detail === 'AUTH_TOKEN_MISMATCH') return 'Login failed: wrong token.';
  if (detail === 'AUTH_PASSWORD_MISMATCH') return 'Login failed: wrong password.';
  if (error.code === 'RATE_LIMITED') return 'Too many failed attempts; try again later. ' + error.message;
  return 'Login failed: ' + error.message;
}

function loginFailed(message, forgetSecret) {
  connection.wanted = false;
  if (forgetSecret) sessionStorage.removeItem(AUTH_KEY);
  setConnectionState('idle', 'not connected');
  showLogin(message);
}

// views

function showLogin(errorMessage) {
  $('app-view').hidden = true;
  $('login-view').hidden = false;
  $('login-submit').disabled = false;
  show($('login-error'), errorMessage);
  $('login-secret').focus();
}

let currentPanel = 'chat';

// What the connection is: a person (their own sessions, usage and memory only) or the
// owner, and whether it holds the admin scope that the people's admin panels need.
function isAdmin() {
  const hello = connection.hello || {};
  return ((hello.auth && hello.auth.scopes) || []).includes('operator.admin');
}

function hasPeople() {
  const hello = connection.hello || {};
  return Boolean(hello.features && hello.features.people);
}

function mainSession() {
  const hello = connection.hello || {};
  const defaults = (hello.snapshot && hello.snapshot.sessionDefaults) || {};
  return defaults.mainSessionKey || DEFAULT_SESSION;
}

function applyIdentity() {
  const hello = connection.hello || {};
  const user = hello.auth && hello.auth.user;
  show($('whoami'), user ? (user.name || user.id) + ' · ' + user.role : (hasPeople() ? 'owner' : ''));
  const admin = isAdmin();
  $('nav-usage').hidden = !hasPeople();
  for (const button of document.querySelectorAll('#nav [data-admin]')) button.hidden = !(admin && hasPeople());
  const panelButton = document.querySelector('#nav [data-panel="' + currentPanel + '"]');
  if (panelButton && panelButton.hidden) currentPanel = 'chat';
  // A person's conversations start in their own main session, not the owner's.
  const main = mainSession();
  if (chat.session === DEFAULT_SESSION && main !== DEFAULT_SESSION) {
    chat.session = main;
    $('chat-session').value = main;
  }
}

function showApp() {
  $('login-view').hidden = true;
  $('app-view').hidden = false;
  show($('login-error'), '');
  applyIdentity();
  loadChatHistory();
  loadSessionOptions();
  showPanel(currentPanel);
}

const loaders = {
  chat: () => $('chat-input').focus(),
  sessions: () => loadSessions(),
  memory: () => { loadMemories(); loadMemoryDoc(); },
  skills: () => loadSkills(),
  cron: () => openCron(),
  status: () => loadStatus(),
  usage: () => loadUsage(),
  users: () => loadUsers(),
  approvals: () => loadApprovals(),
  audit: () => loadAudit(),
};

function showPanel(name) {
  currentPanel = name;
  for (const button of document.querySelectorAll('#nav [data-panel]')) {
    if (button.dataset.panel === name) button.setAttribute('aria-current', 'page');
    else button.removeAttribute('aria-current');
  }
  for (const panel of document.querySelectorAll('main > .panel')) panel.hidden = panel.id !== 'panel-' + name;
  watchCron(name === 'cron');
  watchApprovals(name === 'approvals');
  loaders[name]();
}

function panelState(name, state, error) {
  $('panel-' + name).dataset.state = state;
  const errorElement = $(name + '-error');
  if (errorElement) show(errorElement, error ? error.message : '');
}

// chat

const chat = {
  session: DEFAULT_SESSION,
  bubbles: new Map(),
  tools: new Map(),
  running: new Set(),
  ownRuns: new Set(),
  early: [],
  sending: false,
  historyLoading: false,
  historyToken: 0,
  workers: { timer: null, unavailable: false },
  // Runs whose tool results are being fetched.
  filling: new Set(),
};

// Streamed replies re-render at most this often; each render rebuilds only the last block.
const RENDER_INTERVAL_MS = 40;
const WORKERS_REFRESH_MS = 2000;
// The Markdown source of each assistant bubble.
const replyTexts = new WeakMap();

function updateChatControls() {
  const busy = chat.sending || chat.running.size > 0;
  $('chat-stop').hidden = !busy;
  // Sending before history arrives would let the history render wipe the new message.
  $('chat-send').disabled = busy || chat.historyLoading;
  $('panel-chat').dataset.state = busy ? 'running' : 'idle';
}

function scrollLog() {
  const log = $('chat-log');
  log.scrollTop = log.scrollHeight;
}

// A chat bubble: the user's text as typed, the assistant's rendered from Markdown.
function messageBubble(role, text) {
  const assistant = role === 'assistant';
  const bubble = h('div', { class: 'msg ' + role, 'data-testid': 'chat-message', 'data-role': role },
    h('div', { class: 'msg-role' }, role),
    h('div', { class: 'msg-text' + (assistant ? ' md' : '') }, assistant ? '' : text));
  if (assistant) {
    replyTexts.set(bubble, text);
    renderReplyNow(bubble);
  }
  return bubble;
}

function addMessage(role, text) {
  const bubble = messageBubble(role, text);
  $('chat-log').append(bubble);
  scrollLog();
  return bubble;
}

function renderReplyNow(bubble) {
  clearTimeout(bubble.renderTimer);
  bubble.renderTimer = null;
  squidMarkdown.renderInto(bubble.querySelector('.msg-text'), replyTexts.get(bubble) || '');
}

function renderReplySoon(bubble) {
  if (bubble.renderTimer) return;
  bubble.renderTimer = setTimeout(() => { renderReplyNow(bubble); scrollLog(); }, RENDER_INTERVAL_MS);
}

function showThinking(bubble, text) {
  let block = bubble.querySelector('.thinking');
  if (!text && !block) return;
  if (!block) {
    block = squidCards.thinkingBlock(text);
    bubble.querySelector('.msg-text').before(block);
  } else {
    squidCards.updateThinking(block, text);
  }
}

function setMeta(bubble, text) {
  let meta = bubble.querySelector('.msg-meta');
  if (!meta) { meta = h('div', { class: 'msg-meta' }); bubble.append(meta); }
  meta.textContent = text;
}

function runBubble(runId) {
  let bubble = chat.bubbles.get(runId);
  if (!bubble) {
    bubble = addMessage('assistant', '');
    bubble.dataset.runId = runId;
    bubble.dataset.state = 'streaming';
    bubble.dataset.deltas = '0';
    chat.bubbles.set(runId, bubble);
  }
  return bubble;
}

function setRunning(runId, running) {
  if (running) chat.running.add(runId); else chat.running.delete(runId);
  if (!running) {
    // A run that ended mid-tool (stopped, failed) never reports the tool's result.
    for (const card of chat.tools.values()) {
      if (card.dataset.runId === runId && card.dataset.state === 'running') squidCards.setToolState(card, 'stopped');
    }
    fillToolResults(runId, 3);
  }
  updateChatControls();
  if (running) watchWorkers();
}

// Shows events for the shown session and for runs this page started. While a send is in
// flight its run id is unknown, so other events wait until the answer names it.
function route(payload, apply) {
  if (payload.sessionKey === chat.session || chat.ownRuns.has(payload.runId)) apply(payload);
  else if (chat.sending) chat.early.push([payload, apply]);
}

function onChatEvent(payload) {
  route(payload, applyChatEvent);
}

function onAgentEvent(payload) {
  route(payload, applyAgentEvent);
}

function applyChatEvent(payload) {
  if (!payload.runId) return;
  const bubble = runBubble(payload.runId);
  const full = payload.message ? contentText(payload.message.content) : null;
  if (payload.message) showThinking(bubble, messageThinking(payload.message));
  switch (payload.state) {
    case 'delta':
      if (full) replyTexts.set(bubble, full);
      else if (payload.deltaText) replyTexts.set(bubble, (replyTexts.get(bubble) || '') + payload.deltaText);
      renderReplySoon(bubble);
      bubble.dataset.deltas = String(Number(bubble.dataset.deltas) + 1);
      setRunning(payload.runId, true);
      break;
    case 'final':
      if (full) replyTexts.set(bubble, full);
      renderReplyNow(bubble);
      bubble.dataset.state = 'final';
      setMeta(bubble, payload.stopReason === 'background' ? 'result of background work' : usageText(payload.usage));
      setRunning(payload.runId, false);
      break;
    case 'aborted':
      renderReplyNow(bubble);
      bubble.dataset.state = 'aborted';
      setMeta(bubble, 'stopped');
      setRunning(payload.runId, false);
      break;
    case 'error':
      renderReplyNow(bubble);
      bubble.dataset.state = 'error';
      setMeta(bubble, payload.errorMessage || 'the run failed');
      show($('chat-error'), payload.errorMessage || 'the run failed');
      setRunning(payload.runId, false);
      break;
    default:
      break;
  }
  scrollLog();
}

function applyAgentEvent(payload) {
  const data = payload.data || {};
  if (payload.stream === 'lifecycle') {
    if (data.phase === 'start') setRunning(payload.runId, true);
    if (data.phase === 'end' || data.phase === 'error') setRunning(payload.runId, false);
    if (data.phase === 'error' && (data.error || data.message)) show($('chat-error'), data.error || data.message);
  } else if (payload.stream === 'tool') {
    const key = payload.runId + '/' + (data.toolCallId || data.name);
    let card = chat.tools.get(key);
    if (!card) {
      card = squidCards.toolCard({ name: data.name, callId: data.toolCallId, args: data.args });
      card.dataset.runId = payload.runId;
      chat.tools.set(key, card);
      // Tool activity sits above the reply it led to.
      const bubble = chat.bubbles.get(payload.runId);
      if (bubble) bubble.before(card); else $('chat-log').append(card);
    }
    if (data.phase === 'start') {
      squidCards.setToolState(card, 'running');
    } else {
      squidCards.setToolState(card, data.isError ? 'error' : 'ok', data.durationMs);
      // The finish event carries the (redacted, cut) output; without it the card reads it
      // back from the session when the run ends.
      if (data.result !== undefined) squidCards.setToolResult(card, contentText(data.result));
    }
    scrollLog();
  } else if (payload.stream === 'thinking' || payload.stream === 'reasoning') {
    const bubble = runBubble(payload.runId);
    const block = bubble.querySelector('.thinking');
    const sofar = block ? block.querySelector('.thinking-text').textContent : '';
    showThinking(bubble, typeof data.text === 'string' ? data.text : sofar + (data.delta || ''));
  }
}

// Each tool call's result on the session's active path (all entries while a turn runs), by call id.
function toolResults(result) {
  const entries = result.entries || [];
  const byId = new Map(entries.map((entry) => [entry.id, entry]));
  const path = result.activePath ? result.activePath.map((id) => byId.get(id)).filter(Boolean) : entries;
  const results = new Map();
  for (const entry of path) {
    const body = entry.body || {};
    if (body.kind === 'tool_result') results.set(body.call_id, { text: body.content || '', isError: Boolean(body.is_error) });
  }
  return { path, results };
}

// The fallback for cards whose finish event carried no output (an older gateway): they read
// theirs from the session; the stored copy can lag the run's end a little, hence the retries.
async function fillToolResults(runId, attempts) {
  const cards = [...chat.tools.values()].filter((card) => card.dataset.runId === runId && card.dataset.callId
    && !card.dataset.result);
  if (!cards.length || !connection.authenticated || chat.filling.has(runId)) return;
  const session = chat.session;
  chat.filling.add(runId);
  try {
    const { results } = toolResults(await request('sessions.get', { key: session }));
    if (session !== chat.session) return;
    for (const card of cards) {
      const output = results.get(card.dataset.callId);
      if (output) squidCards.setToolResult(card, output.text);
    }
  } catch {
    // The cards keep their status; the Sessions panel shows the results too.
    return;
  } finally {
    chat.filling.delete(runId);
  }
  if (attempts > 1 && cards.some((card) => !card.dataset.result)) {
    setTimeout(() => fillToolResults(runId, attempts - 1), 1000);
  }
}

// The running sub-agents of the shown session, polled while a run or a worker is active.
function watchWorkers() {
  if (chat.workers.timer || chat.workers.unavailable) return;
  chat.workers.timer = setTimeout(pollWorkers, 0);
}

async function pollWorkers() {
  const session = chat.session;
  let running = [];
  try {
    const result = await request('workers.list', { sessionKey: session });
    running = (result.workers || []).filter((worker) => worker.state === 'running' || worker.state === 'waiting_for_input');
  } catch (error) {
    if (error.code === 'UNAVAILABLE') chat.workers.unavailable = true;
    chat.workers.timer = null;
    showWorkers([]);
    return;
  }
  chat.workers.timer = null;
  if (session !== chat.session) { watchWorkers(); return; }
  showWorkers(running);
  if ((running.length || chat.running.size) && connection.authenticated) {
    chat.workers.timer = setTimeout(pollWorkers, WORKERS_REFRESH_MS);
  }
}

function showWorkers(workers) {
  const list = $('chat-workers');
  list.replaceChildren(...squidCards.workerItems(workers));
  list.hidden = !workers.length;
}

function chatDisconnected() {
  chat.sending = false;
  chat.running.clear();
  clearTimeout(chat.workers.timer);
  chat.workers.timer = null;
  chat.workers.unavailable = false;
  showWorkers([]);
  for (const bubble of chat.bubbles.values()) {
    if (bubble.dataset.state === 'streaming') { bubble.dataset.state = 'error'; setMeta(bubble, 'connection lost'); }
  }
  updateChatControls();
}

function resetChatLog() {
  $('chat-log').replaceChildren();
  chat.bubbles.clear();
  chat.tools.clear();
  chat.running.clear();
  showWorkers([]);
  updateChatControls();
}

// The transcript as one fragment (a single layout, however long): messages, and the tool
// calls of the shown turns, each before the message that followed it.
function historyFragment(messages, session) {
  const fragment = document.createDocumentFragment();
  const bubbles = new Map();
  for (const message of messages) {
    const bubble = messageBubble(message.role === 'user' ? 'user' : 'assistant', contentText(message.content));
    if (message.id) { bubble.dataset.entryId = message.id; bubbles.set(message.id, bubble); squidTree.decorate(bubble); }
    if (message.role !== 'user') showThinking(bubble, messageThinking(message));
    fragment.append(bubble);
  }
  if (!session) return fragment;
  const { path, results } = toolResults(session);
  let shown = false;
  let cards = [];
  for (const entry of path) {
    const body = entry.body || {};
    const bubble = bubbles.get(entry.id);
    shown = shown || Boolean(bubble);
    if (bubble && cards.length) { bubble.before(...cards); cards = []; }
    if (!shown || body.kind !== 'tool_call') continue;
    const output = results.get(body.call_id);
    const card = squidCards.toolCard({ name: body.name, callId: body.call_id, args: body.arguments,
      state: output ? (output.isError ? 'error' : 'ok') : 'stopped' });
    if (output) squidCards.setToolResult(card, output.text);
    cards.push(card);
  }
  fragment.append(...cards);
  return fragment;
}

async function loadChatHistory() {
  const token = ++chat.historyToken;
  chat.historyLoading = true;
  updateChatControls();
  try {
    // The session's entries add the tool calls; without them (a new session) messages suffice.
    const [history, session] = await Promise.all([
      request('chat.history', { sessionKey: chat.session, limit: 200 }),
      request('sessions.get', { key: chat.session }).catch(() => null),
    ]);
    if (token !== chat.historyToken) return;
    resetChatLog();
    $('chat-log').append(historyFragment(history.messages || [], session));
    scrollLog();
    watchWorkers();
    squidTree.refresh();
  } catch (error) {
    if (token === chat.historyToken) show($('chat-error'), "can't load history: " + error.message);
  } finally {
    if (token === chat.historyToken) { chat.historyLoading = false; updateChatControls(); }
  }
}

async function sendMessage(event) {
  event.preventDefault();
  const input = $('chat-input');
  const typed = input.value.trim();
  const attachments = squidUploads.pending();
  if ((!typed && !attachments.length) || chat.sending || chat.running.size || chat.historyLoading) return;
  const names = attachments.map((file) => file.name).join(', ');
  const message = typed || 'Sent: ' + names;
  show($('chat-error'), '');
  addMessage('user', typed && names ? message + '\n[attached: ' + names + ']' : message);
  input.value = '';
  chat.sending = true;
  updateChatControls();
  try {
    const params = { sessionKey: chat.session, message, idempotencyKey: newId() };
    if (attachments.length) params.attachments = attachments;
    const result = await request('chat.send', params);
    squidUploads.clear();
    if (result.runId) {
      chat.ownRuns.add(result.runId);
      for (const [payload, apply] of chat.early) if (payload.runId === result.runId) apply(payload);
      const bubble = runBubble(result.runId);
      if (bubble.dataset.state === 'streaming') chat.running.add(result.runId);
    }
  } catch (error) {
    show($('chat-error'), "can't send: " + error.message);
  } finally {
    chat.sending = false;
    chat.early = [];
    updateChatControls();
  }
}

async function stopRun() {
  try {
    const result = await request('chat.abort', { sessionKey: chat.session });
    // Nothing was running server-side: the page's idea of a run is stale.
    if (!result.aborted) { chat.running.clear(); updateChatControls(); }
  } catch (error) {
    show($('chat-error'), "can't stop: " + error.message);
  }
}

async function newConversation() {
  try {
    await request('sessions.reset', { sessionKey: chat.session });
    resetChatLog();
    show($('chat-error'), '');
  } catch (error) {
    show($('chat-error'), "can't reset: " + error.message);
  }
}

function switchSession(key) {
  const trimmed = key.trim() || mainSession();
  $('chat-session').value = trimmed;
  if (trimmed === chat.session) return;
  chat.session = trimmed;
  resetChatLog();
  loadChatHistory();
}

// sessions

function fillSessionOptions(sessions) {
  $('chat-session-options').replaceChildren(...sessions.map((session) => h('option', { value: session.key })));
}

async function loadSessionOptions() {
  try {
    fillSessionOptions((await request('sessions.list', {})).sessions || []);
  } catch {
    // The picker still accepts typed keys; the Sessions panel reports list errors.
  }
}

async function loadSessions() {
  panelState('sessions', 'loading');
  try {
    const result = await request('sessions.list', {});
    const sessions = (result.sessions || []).slice()
      .sort((a, b) => new Date(b.updatedAt || 0) - new Date(a.updatedAt || 0));
    const list = $('sessions-list');
    list.replaceChildren();
    if (!sessions.length) list.append(h('li', { id: 'sessions-empty', class: 'muted' }, 'No sessions yet.'));
    for (const session of sessions) {
      list.append(h('li', {},
        h('button', {
          type: 'button', class: 'session-item', 'data-testid': 'session-item', 'data-key': session.key,
          onclick: () => openSession(session.key),
        },
        h('span', { class: 'session-title' }, session.title || session.key),
        h('span', { class: 'session-meta' },
          (session.entries ?? 0) + ' entries · ' + formatTime(session.updatedAt) + (session.archived ? ' · archived' : '')))));
    }
    fillSessionOptions(sessions);
    panelState('sessions', 'loaded');
  } catch (error) {
    panelState('sessions', 'error', error);
  }
}

async function openSession(key) {
  for (const item of document.querySelectorAll('.session-item')) {
    item.setAttribute('aria-current', String(item.dataset.key === key));
  }
  const view = $('session-transcript');
  view.dataset.state = 'loading';
  view.dataset.key = key;
  try {
    const result = await request('sessions.get', { key });
    if (view.dataset.key !== key) return;
    const entries = result.entries || [];
    view.replaceChildren(
      h('div', { class: 'bar' },
        h('h2', { id: 'transcript-title' }, key),
        h('span', { class: 'muted' }, entries.length + ' entries'),
        h('button', { type: 'button', id: 'transcript-open-chat', class: 'secondary',
          onclick: () => { switchSession(key); showPanel('chat'); } }, 'Open in chat')),
      entries.length ? renderTree(entries, result.leaf) : h('p', { class: 'muted' }, 'This session is empty.'));
    view.dataset.state = 'loaded';
  } catch (error) {
    view.replaceChildren(h('p', { class: 'error' }, "can't open " + key + ': ' + error.message));
    view.dataset.state = 'error';
  }
}

// Straight runs of entries render flat; only forks indent, one box per branch.
function renderTree(entries, leaf) {
  const byId = new Map(entries.map((entry) => [entry.id, entry]));
  const children = new Map();
  const roots = [];
  for (const entry of entries) {
    if (entry.parent !== undefined && entry.parent !== null && byId.has(entry.parent)) {
      if (!children.has(entry.parent)) children.set(entry.parent, []);
      children.get(entry.parent).push(entry);
    } else {
      roots.push(entry);
    }
  }
  const active = new Set();
  for (let id = leaf; id !== undefined && id !== null && byId.has(id) && !active.has(id); id = byId.get(id).parent) {
    active.add(id);
  }
  const tree = h('div', { class: 'tree', id: 'transcript-tree' });
  renderSiblings(tree, roots, children, active);
  return tree;
}

function renderSiblings(container, nodes, children, active) {
  if (nodes.length === 1) { renderChain(container, nodes[0], children, active); return; }
  const box = h('div', { class: 'branches' });
  nodes.forEach((node, index) => {
    const isActive = active.has(node.id);
    const branch = h('div', { class: 'branch' + (isActive ? ' active' : ''), 'data-testid': 'transcript-branch' },
      h('div', { class: 'branch-label' }, 'branch ' + (index + 1) + ' of ' + nodes.length + (isActive ? ' (active)' : '')));
    renderChain(branch, node, children, active);
    box.append(branch);
  });
  container.append(box);
}

function renderChain(container, start, children, active) {
  for (let node = start; node;) {
    container.append(renderEntry(node, active.has(node.id)));
    const next = children.get(node.id) || [];
    if (next.length === 1) { node = next[0]; continue; }
    if (next.length > 1) renderSiblings(container, next, children, active);
    break;
  }
}

function shorten(text, limit) {
  return text.length > limit ? text.slice(0, limit) + '…' : text;
}

function renderEntry(entry, isActive) {
  const body = entry.body || {};
  const kind = body.kind || 'unknown';
  let label = kind;
  let text;
  let failed = false;
  switch (kind) {
    case 'message':
      label = body.role + (body.model ? ' · ' + body.model : '');
      text = contentText(body.content);
      break;
    case 'tool_call': {
      const args = typeof body.arguments === 'string' ? body.arguments : JSON.stringify(body.arguments);
      label = 'tool call';
      text = body.name + '(' + shorten(args || '', 400) + ')';
      break;
    }
    case 'tool_result':
      label = body.is_error ? 'tool error' : 'tool result';
      text = body.name + ': ' + shorten(contentText(body.content), 800);
      failed = Boolean(body.is_error);
      break;
    case 'compaction':
      text = body.summary || '';
      break;
    case 'model_change':
      label = 'model change';
      text = (body.previous || '?') + ' → ' + (body.new || '?');
      break;
    default:
      text = shorten(JSON.stringify(body), 400);
  }
  return h('div', {
    class: 'entry ' + kind + (isActive ? ' active' : '') + (failed ? ' error' : ''),
    'data-testid': 'transcript-entry', 'data-kind': kind, 'data-entry-id': entry.id, 'data-active': String(isActive),
  },
  h('span', { class: 'entry-label' }, label),
  h('span', { class: 'entry-time' }, formatTime(entry.timestamp)),
  h('div', { class: 'entry-text' }, text));
}

// memory

async function loadMemories() {
  panelState('memory', 'loading');
  const query = $('memory-search').value.trim();
  try {
    const result = await request('memory.list', { query: query || undefined, limit: 100 });
    const rows = $('memory-rows');
    rows.replaceChildren();
    const memories = result.memories || [];
    if (!memories.length) {
      rows.append(h('tr', { id: 'memory-empty' }, h('td', { colspan: 5, class: 'muted' }, query ? 'No matching memories.' : 'No memories yet.')));
    }
    for (const memory of memories) {
      rows.append(h('tr', { 'data-testid': 'memory-item', 'data-id': memory.id },
        h('td', {}, memory.type || ''),
        h('td', { class: 'memory-content' }, memory.content || ''),
        h('td', {}, memory.importance ?? ''),
        h('td', {}, formatTime(memory.created_at)),
        h('td', {}, h('button', { type: 'button', class: 'small danger', 'data-testid': 'memory-delete',
          onclick: () => deleteMemory(memory.id) }, 'Delete'))));
    }
    panelState('memory', 'loaded');
  } catch (error) {
    panelState('memory', 'error', error);
  }
}

async function addMemory(event) {
  event.preventDefault();
  const content = $('memory-new-content').value.trim();
  if (!content) return;
  const importance = Number($('memory-new-importance').value);
  try {
    await request('memory.save', {
      content, type: $('memory-new-type').value, importance: Number.isFinite(importance) ? importance : undefined,
    });
    $('memory-new-content').value = '';
    await loadMemories();
  } catch (error) {
    panelState('memory', 'error', error);
  }
}

async function deleteMemory(id) {
  try {
    await request('memory.delete', { id });
    await loadMemories();
  } catch (error) {
    panelState('memory', 'error', error);
  }
}

const memoryDoc = { cap: null };

function docStatus(state, text) {
  const status = $('memory-doc-status');
  status.dataset.state = state;
  status.textContent = text;
}

function countDoc() {
  const length = $('memory-doc').value.length;
  $('memory-doc-count').textContent = memoryDoc.cap ? '(' + length + ' / ' + memoryDoc.cap + ' chars)' : '(' + length + ' chars)';
}

async function loadMemoryDoc() {
  docStatus('loading', 'loading…');
  try {
    const result = await request('memory.doc.get', {});
    $('memory-doc').value = result.text || '';
    $('memory-doc-location').textContent = result.location || '';
    memoryDoc.cap = result.cap || null;
    countDoc();
    docStatus('loaded', '');
  } catch (error) {
    docStatus('error', "can't load memory.md: " + error.message);
  }
}

async function saveMemoryDoc() {
  docStatus('saving', 'saving…');
  try {
    await request('memory.doc.set', { text: $('memory-doc').value });
    docStatus('saved', 'Saved');
  } catch (error) {
    docStatus('error', "can't save memory.md: " + error.message);
  }
}

// skills, cron, status

async function loadSkills() {
  panelState('skills', 'loading');
  try {
    const result = await request('skills.list', {});
    const list = $('skills-list');
    list.replaceChildren();
    const skills = result.skills || [];
    if (!skills.length) list.append(h('p', { id: 'skills-empty', class: 'muted' }, 'No skills installed.'));
    for (const skill of skills) {
      const requires = skill.requires || {};
      const needs = [...(requires.bins || []).map((bin) => 'bin ' + bin), ...(requires.env || []).map((name) => 'env ' + name)];
      list.append(h('div', { class: 'skill', 'data-testid': 'skill-item', 'data-name': skill.name, 'data-available': String(Boolean(skill.available)) },
        h('div', { class: 'bar' }, h('strong', {}, skill.name),
          h('span', { class: 'badge ' + (skill.available ? 'yes' : 'no') }, skill.available ? 'available' : 'unavailable')),
        h('p', {}, skill.description || ''),
        needs.length ? h('p', { class: 'muted' }, 'Requires: ' + needs.join(', ')) : null,
        skill.location ? h('p', { class: 'muted' }, h('code', {}, skill.location)) : null));
    }
    panelState('skills', 'loaded');
  } catch (error) {
    panelState('skills', 'error', error);
  }
}

const CRON_REFRESH_MS = 10000;
// `notice` is the outcome of the last action, kept across polls until the panel is reopened.
const cron = { timer: null, token: 0, notice: '' };

// Job times come as RFC 3339 in the job's own zone; its wall-clock time is shown (the zone
// has its own column) and the full value is the cell's tooltip.
function formatJobTime(value) {
  if (!value) return '—';
  const match = /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d)/.exec(value);
  return match ? match[1] + ' ' + match[2] : String(value);
}

function cronNotice(text, ok) {
  const message = $('cron-message');
  message.className = ok ? 'notice ok' : 'notice';
  show(message, text);
}

// Polls while the Cron panel is open, so next runs, last runs and failures stay current.
function watchCron(open) {
  clearInterval(cron.timer);
  cron.timer = null;
  if (!open) return;
  cron.timer = setInterval(() => {
    if (currentPanel === 'cron' && connection.authenticated && !document.hidden) loadCron({ quiet: true });
  }, CRON_REFRESH_MS);
}

function openCron() {
  cron.notice = '';
  show($('cron-action-error'), '');
  loadCron();
}

function cronRow(job, schedulerRunning) {
  const paused = job.status === 'paused';
  // HEARTBEAT.md owns heartbeat jobs and squidbot its system jobs: those only pause.
  const removable = job.kind === 'user';
  const actions = h('div', { class: 'cron-actions' },
    h('button', { type: 'button', class: 'small secondary', 'data-testid': 'cron-toggle',
      onclick: () => cronAction(paused ? 'cron.resume' : 'cron.pause', job) }, paused ? 'Resume' : 'Pause'),
    h('button', { type: 'button', class: 'small secondary', 'data-testid': 'cron-run', disabled: !schedulerRunning,
      title: schedulerRunning ? 'Run this job now' : 'The scheduler is not running in this gateway',
      onclick: () => cronAction('cron.run', job) }, 'Run now'),
    removable ? h('button', { type: 'button', class: 'small danger', 'data-testid': 'cron-remove',
      onclick: () => cronAction('cron.remove', job) }, 'Remove') : null);
  return h('tr', { 'data-testid': 'cron-job', 'data-id': job.id, 'data-kind': job.kind, 'data-status': job.status },
    h('td', { class: 'cron-name', title: job.message || '' }, job.name || job.id),
    h('td', { class: 'cron-kind' }, h('span', { class: 'badge kind' }, job.kind || '')),
    h('td', { class: 'cron-schedule' }, h('code', {}, job.describe || job.schedule || '')),
    h('td', { class: 'cron-timezone' }, job.timezone || ''),
    h('td', { class: 'cron-next', title: job.next_run || '' }, paused ? '— (paused)' : formatJobTime(job.next_run)),
    h('td', { class: 'cron-last', title: job.last_run || '' }, formatJobTime(job.last_run)),
    h('td', { class: 'cron-status' }, h('span', { class: 'badge ' + (paused ? 'no' : 'yes') }, job.status || '')),
    h('td', { class: 'cron-failures' }, job.failures ?? 0),
    h('td', { class: 'cron-last-error' }, job.last_error || ''),
    h('td', {}, actions));
}

function cronSummary(status) {
  const parts = [status.jobs + (status.jobs === 1 ? ' job' : ' jobs'), status.active + ' active', status.paused + ' paused'];
  if (status.nextRun) parts.push('next run ' + formatJobTime(status.nextRun));
  if (!status.enabled) parts.push('scheduler not running');
  return parts.join(' · ');
}

async function loadCron(options) {
  const quiet = options && options.quiet;
  const token = ++cron.token;
  if (!quiet) panelState('cron', 'loading');
  try {
    const [result, status] = await Promise.all([request('cron.list', {}), request('cron.status', {})]);
    if (token !== cron.token) return;
    const jobs = result.jobs || [];
    $('cron-rows').replaceChildren(...jobs.map((job) => cronRow(job, status.enabled)));
    $('cron-table').hidden = !jobs.length;
    $('cron-summary').textContent = cronSummary(status);
    $('cron-new-tz').placeholder = 'Timezone (default ' + (status.timezone || 'of the gateway') + ')';
    $('cron-add-section').hidden = false;
    if (!status.enabled) cronNotice('The scheduler is not running in this gateway: jobs are kept but do not run.');
    else if (!jobs.length) cronNotice(cron.notice ? cron.notice + ' No cron jobs.' : 'No cron jobs.', true);
    else cronNotice(cron.notice, true);
    panelState('cron', 'loaded');
  } catch (error) {
    if (token !== cron.token) return;
    // A missed poll keeps what is shown; the next one retries.
    if (quiet && error.code !== 'UNAVAILABLE' && $('panel-cron').dataset.state === 'loaded') return;
    $('cron-table').hidden = true;
    $('cron-add-section').hidden = true;
    $('cron-summary').textContent = '';
    cronNotice('Cron is unavailable: ' + error.message);
    panelState('cron', error.code === 'UNAVAILABLE' ? 'unavailable' : 'error');
  }
}

const CRON_ACTIONS = {
  'cron.pause': ['pause', 'Paused'],
  'cron.resume': ['resume', 'Resumed'],
  'cron.run': ['run', 'Started a run of'],
  'cron.remove': ['remove', 'Removed'],
};

async function cronAction(method, job) {
  const [verb, done] = CRON_ACTIONS[method];
  const label = job.name || job.id;
  let failure = '';
  try {
    await request(method, { id: job.id });
    cron.notice = done + ' ' + label + '.';
  } catch (error) {
    cron.notice = '';
    failure = "can't " + verb + ' job ' + label + ': ' + error.message;
  }
  show($('cron-action-error'), failure);
  await loadCron();
}

async function addCronJob(event) {
  event.preventDefault();
  const name = $('cron-new-name').value.trim();
  const schedule = $('cron-new-schedule').value.trim();
  const message = $('cron-new-message').value.trim();
  const tz = $('cron-new-tz').value.trim();
  show($('cron-add-error'), '');
  $('cron-add').disabled = true;
  try {
    const result = await request('cron.add', { name, schedule, message, tz: tz || undefined });
    for (const id of ['cron-new-name', 'cron-new-schedule', 'cron-new-message']) $(id).value = '';
    const job = result.job || {};
    cron.notice = 'Added ' + (job.name || name) + ', next run ' + formatJobTime(job.next_run) + ' ' + (job.timezone || '') + '.';
    await loadCron();
  } catch (error) {
    show($('cron-add-error'), error.message);
  } finally {
    $('cron-add').disabled = false;
  }
}

// `status` lists providers as configured (name, kind, redacted base URL) with their last call.
function providerText(provider) {
  const last = provider.lastCall;
  const call = last ? 'last call ' + (last.ok ? 'ok' : 'failed') + ' ' + formatTime(last.at) : 'no calls yet';
  return provider.name + ' (' + provider.kind + ') · ' + (provider.api_base || 'default URL')
    + (provider.vision ? ' · vision' : '') + ' · ' + call;
}

async function loadStatus() {
  panelState('status', 'loading');
  try {
    const status = await request('status', {});
    $('status-version').textContent = status.version || '—';
    $('status-uptime').textContent = formatDuration(status.uptimeMs);
    $('status-model').textContent = status.model || '—';
    const providers = status.providers || [];
    $('status-providers').replaceChildren(...(providers.length ? providers.map((p) =>
      h('li', { 'data-testid': 'status-provider' }, providerText(p)))
      : [h('li', { class: 'muted' }, 'none')]));
    const channels = status.channels || [];
    $('status-channels').replaceChildren(...(channels.length ? channels.map((c) =>
      h('li', { 'data-testid': 'status-channel' }, c.name + ': ' + (c.state || '?')))
      : [h('li', { class: 'muted' }, 'none')]));
    const usage = status.usage || {};
    const counted = usage.turns !== undefined ? usage.turns + ' turns' : (usage.modelCalls ?? 0) + ' model calls';
    $('status-usage').textContent = counted + ' · ' + (usage.inputTokens ?? 0) + ' input · '
      + (usage.outputTokens ?? 0) + ' output tokens';
    $('status-sessions').textContent = status.sessionsOpen ?? '—';
    $('status-connections').textContent = status.wsConnections ?? '—';
    const memory = status.memory;
    $('status-memory').textContent = memory ? (memory.mode || '?') + ' · ' + (memory.count ?? 0) + ' memories' : '—';
    panelState('status', 'loaded');
  } catch (error) {
    panelState('status', 'error', error);
  }
}

// people: usage, users, approvals, audit

function formatCost(cost) {
  return cost ? Number(cost).toFixed(4) : '—';
}

function usageRow(row, testid) {
  return h('tr', { 'data-testid': testid, 'data-key': row.key },
    h('td', {}, row.key),
    h('td', {}, row.calls ?? 0),
    h('td', {}, row.inputTokens ?? 0),
    h('td', {}, row.outputTokens ?? 0),
    h('td', {}, (row.cacheReadTokens ?? 0) + (row.cacheWriteTokens ?? 0)),
    h('td', {}, row.tokens ?? 0),
    h('td', {}, formatCost(row.cost)));
}

async function loadUsage() {
  panelState('usage', 'loading');
  try {
    const [days, users, models] = await Promise.all([
      request('usage.get', { by: 'day', since: '30d' }),
      request('usage.get', { by: 'user', since: '30d' }),
      request('usage.get', { by: 'model', since: '30d' }),
    ]);
    $('usage-scope').textContent = isAdmin() ? 'everyone, last 30 days' : 'yours, last 30 days';
    $('usage-chart').replaceChildren(squidUsage.dayChart(days.rows || []));
    $('usage-days').replaceChildren(squidUsage.dayTable(days.rows || []));
    $('usage-model-chart').replaceChildren(squidUsage.modelChart(models.rows || []));
    const total = days.total || {};
    $('usage-total').textContent = (total.calls ?? 0) + ' model calls · ' + (total.tokens ?? 0) + ' tokens · cost '
      + formatCost(total.cost);
    const empty = (columns) => h('tr', {}, h('td', { colspan: columns, class: 'muted' }, 'No usage yet.'));
    const userRows = users.rows || [];
    $('usage-users').replaceChildren(...(userRows.length ? userRows.map((row) => usageRow(row, 'usage-user')) : [empty(7)]));
    const modelRows = models.rows || [];
    $('usage-models').replaceChildren(...(modelRows.length ? modelRows.map((row) => usageRow(row, 'usage-model')) : [empty(7)]));
    panelState('usage', 'loaded');
  } catch (error) {
    panelState('usage', error.code === 'UNAVAILABLE' ? 'unavailable' : 'error', error);
  }
}

async function loadUsers() {
  panelState('users', 'loading');
  try {
    const result = await request('users.list', {});
    const users = result.users || [];
    const token = (user) => {
      if (!user.token) return 'unknown';
      return user.token.set ? 'set ' + formatTime(user.token.createdMs) : 'none';
    };
    $('users-rows').replaceChildren(...(users.length ? users.map((user) =>
      h('tr', { 'data-testid': 'user-row', 'data-id': user.id, 'data-disabled': String(Boolean(user.disabled)) },
        h('td', { class: 'user-id' }, user.id),
        h('td', {}, user.name || ''),
        h('td', {}, h('span', { class: 'badge kind' }, user.role || '')),
        h('td', {}, h('code', {}, user.context || '')),
        h('td', {}, (user.identities || []).join(', ') || '—'),
        h('td', {}, token(user)),
        h('td', {}, h('span', { class: 'badge ' + (user.disabled ? 'no' : 'yes') }, user.disabled ? 'disabled' : 'enabled'))))
      : [h('tr', {}, h('td', { colspan: 7, class: 'muted' }, 'No users yet.'))]));
    panelState('users', 'loaded');
  } catch (error) {
    panelState('users', 'error', error);
  }
}

const APPROVALS_REFRESH_MS = 5000;
const approvals = { timer: null, token: 0 };

function watchApprovals(open) {
  clearInterval(approvals.timer);
  approvals.timer = null;
  if (!open) return;
  approvals.timer = setInterval(() => {
    if (currentPanel === 'approvals' && connection.authenticated && !document.hidden) loadApprovals({ quiet: true });
  }, APPROVALS_REFRESH_MS);
}

function approvalCard(approval) {
  const actor = approval.actor || {};
  const reason = h('input', { placeholder: 'Reason (optional)', 'aria-label': 'Reason', 'data-testid': 'approval-reason' });
  return h('div', { class: 'skill approval', 'data-testid': 'approval', 'data-id': approval.id },
    h('div', { class: 'bar' }, h('strong', {}, approval.tool), h('code', {}, approval.id),
      h('span', { class: 'muted' }, 'expires ' + formatTime(approval.expiresMs))),
    h('p', {}, (actor.name || actor.user || '?') + ' (' + (actor.role || '?') + ') asks in ', h('code', {}, approval.sessionKey || '')),
    h('pre', { class: 'arguments' }, approval.arguments || ''),
    h('p', { class: 'muted' }, approval.rule || ''),
    h('div', { class: 'row' },
      h('button', { type: 'button', 'data-testid': 'approval-approve',
        onclick: () => decideApproval('approvals.approve', approval.id, {}) }, 'Approve'),
      reason,
      h('button', { type: 'button', class: 'danger', 'data-testid': 'approval-deny',
        onclick: () => decideApproval('approvals.deny', approval.id, { reason: reason.value.trim() || undefined }) }, 'Deny')));
}

async function loadApprovals(options) {
  const quiet = options && options.quiet;
  const token = ++approvals.token;
  if (!quiet) panelState('approvals', 'loading');
  try {
    const result = await request('approvals.list', {});
    if (token !== approvals.token) return;
    const pending = result.approvals || [];
    const count = $('approvals-count');
    count.textContent = String(pending.length);
    count.hidden = !pending.length;
    // A poll must not wipe a reason being typed.
    const typing = document.activeElement && document.activeElement.dataset.testid === 'approval-reason';
    if (!(quiet && typing)) {
      $('approvals-list').replaceChildren(...(pending.length ? pending.map(approvalCard)
        : [h('p', { id: 'approvals-empty', class: 'muted' }, 'Nothing waits for an approval.')]));
    }
    panelState('approvals', 'loaded');
  } catch (error) {
    if (token !== approvals.token) return;
    if (quiet && $('panel-approvals').dataset.state === 'loaded') return;
    panelState('approvals', 'error', error);
  }
}

async function decideApproval(method, id, params) {
  const verb = method === 'approvals.approve' ? 'Approved' : 'Denied';
  try {
    await request(method, Object.assign({ id }, params));
    show($('approvals-message'), verb + ' request ' + id + '.');
    show($('approvals-error'), '');
  } catch (error) {
    show($('approvals-message'), '');
    show($('approvals-error'), "can't decide request " + id + ': ' + error.message);
  }
  await loadApprovals({ quiet: true });
}

function auditDetail(detail) {
  if (detail === undefined || detail === null) return '';
  return typeof detail === 'string' ? detail : JSON.stringify(detail);
}

async function loadAudit(event) {
  if (event) event.preventDefault();
  panelState('audit', 'loading');
  try {
    const user = $('audit-user').value.trim();
    const since = $('audit-since').value;
    const result = await request('audit.list', { user: user || undefined, since: since || undefined, limit: 200 });
    const rows = result.rows || [];
    $('audit-rows').replaceChildren(...(rows.length ? rows.map((row) =>
      h('tr', { 'data-testid': 'audit-row', 'data-seq': row.seq, 'data-ok': String(Boolean(row.ok)) },
        h('td', {}, row.seq),
        h('td', {}, formatTime(row.atMs)),
        h('td', {}, h('span', { class: 'badge kind' }, row.kind)),
        h('td', {}, row.actor),
        h('td', {}, row.subject),
        h('td', {}, h('span', { class: 'badge ' + (row.ok ? 'yes' : 'no') }, row.ok ? 'ok' : 'refused')),
        h('td', { class: 'audit-detail' }, shorten(auditDetail(row.detail), 300))))
      : [h('tr', {}, h('td', { colspan: 7, class: 'muted' }, 'No audit rows.'))]));
    panelState('audit', 'loaded');
  } catch (error) {
    panelState('audit', 'error', error);
  }
}

async function verifyAudit() {
  const verdict = $('audit-verdict');
  verdict.className = 'notice';
  show(verdict, 'verifying…');
  try {
    const result = await request('audit.verify', {});
    verdict.className = result.ok ? 'notice ok' : 'notice';
    show(verdict, result.ok ? 'The audit chain is intact (' + result.rows + ' rows).' : 'The audit chain is broken: ' + result.problem);
  } catch (error) {
    show(verdict, "can't verify: " + error.message);
  }
}

// wiring

function updateSecretLabel() {
  const password = $('login-mode-password').checked;
  $('login-secret-label').textContent = password ? 'Gateway password' : 'Gateway token';
}

function login(event) {
  event.preventDefault();
  const secret = $('login-secret').value;
  if (!secret) return;
  const mode = $('login-mode-password').checked ? 'password' : 'token';
  sessionStorage.setItem(AUTH_KEY, JSON.stringify({ mode, secret }));
  $('login-secret').value = '';
  $('login-submit').disabled = true;
  show($('login-error'), '');
  startConnection();
}

function startConnection() {
  connection.wanted = true;
  connection.attempt = 0;
  if (connection.socket) { const old = connection.socket; connection.socket = null; old.close(); }
  connect();
}

function logout() {
  sessionStorage.removeItem(AUTH_KEY);
  connection.wanted = false;
  clearTimeout(connection.retryTimer);
  if (connection.socket) { const old = connection.socket; connection.socket = null; connection.authenticated = false; old.close(); }
  failPending('logged out');
  chatDisconnected();
  // The next login may be someone else, whose main session is their own.
  chat.session = DEFAULT_SESSION;
  $('chat-session').value = DEFAULT_SESSION;
  connection.hello = null;
  setConnectionState('idle', 'not connected');
  showLogin('');
}

function init() {
  $('login-gateway').textContent = location.host;
  $('login-form').addEventListener('submit', login);
  $('login-mode-token').addEventListener('change', updateSecretLabel);
  $('login-mode-password').addEventListener('change', updateSecretLabel);
  $('logout').addEventListener('click', logout);
  for (const button of document.querySelectorAll('#nav [data-panel]')) {
    button.addEventListener('click', () => showPanel(button.dataset.panel));
  }
  $('chat-form').addEventListener('submit', sendMessage);
  $('chat-input').addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $('chat-form').requestSubmit();
    }
  });
  $('chat-stop').addEventListener('click', stopRun);
  $('chat-new').addEventListener('click', newConversation);
  squidTree.init();
  squidUploads.init();
  $('chat-session').addEventListener('change', (event) => switchSession(event.target.value));
  $('sessions-refresh').addEventListener('click', loadSessions);
  $('memory-search-form').addEventListener('submit', (event) => { event.preventDefault(); loadMemories(); });
  $('memory-add-form').addEventListener('submit', addMemory);
  $('memory-doc').addEventListener('input', () => { countDoc(); docStatus('dirty', 'unsaved changes'); });
  $('memory-doc-save').addEventListener('click', saveMemoryDoc);
  $('memory-doc-reload').addEventListener('click', loadMemoryDoc);
  $('skills-refresh').addEventListener('click', loadSkills);
  $('cron-refresh').addEventListener('click', () => loadCron());
  $('cron-add-form').addEventListener('submit', addCronJob);
  $('status-refresh').addEventListener('click', loadStatus);
  $('usage-refresh').addEventListener('click', loadUsage);
  $('users-refresh').addEventListener('click', loadUsers);
  $('approvals-refresh').addEventListener('click', () => loadApprovals());
  $('audit-refresh').addEventListener('click', () => loadAudit());
  $('audit-filter').addEventListener('submit', loadAudit);
  $('audit-verify').addEventListener('click', verifyAudit);

  const auth = loadAuth();
  if (auth) {
    $('login-mode-password').checked = auth.mode === 'password';
    updateSecretLabel();
    startConnection();
  } else {
    showLogin('');
  }
}

init();
