// squidbot web UI, chat view: the session's branches (fork, switch, export) and the files
// sent with a message. Loaded before app.js; these functions only run once app.js has
// loaded, and use its helpers (h, $, show, request, chat, loadChatHistory).
// Server text only ever reaches the page as text nodes.
'use strict';

const squidTree = {
  // The blob: URL of the last export, revoked when the next one is made.
  exportUrl: null,
  // Drops answers of loads that a newer one overtook.
  token: 0,

  init() {
    $('chat-branches-toggle').addEventListener('click', () => squidTree.toggle());
    $('chat-export').addEventListener('click', () => squidTree.exportSession());
  },

  isOpen() {
    return !$('chat-branches').hidden;
  },

  toggle(open = !squidTree.isOpen()) {
    $('chat-branches').hidden = !open;
    $('chat-branches-toggle').setAttribute('aria-expanded', String(open));
    if (open) squidTree.load();
  },

  // Reloads the list when the drawer is open (after the transcript changed).
  refresh() {
    if (squidTree.isOpen()) squidTree.load();
  },

  async load() {
    const token = ++squidTree.token;
    const drawer = $('chat-branches');
    drawer.dataset.state = 'loading';
    show($('chat-branches-error'), '');
    try {
      const tree = await request('sessions.tree', { key: chat.session });
      if (token !== squidTree.token) return;
      $('chat-branch-list').replaceChildren(...squidTree.branchItems(tree.nodes || []));
      drawer.dataset.state = 'loaded';
    } catch (error) {
      if (token !== squidTree.token) return;
      // A session nobody wrote to yet has no tree: it is one empty branch.
      $('chat-branch-list').replaceChildren(h('li', { class: 'muted' }, 'No messages yet.'));
      if (error.code !== 'NOT_FOUND') show($('chat-branches-error'), "can't load branches: " + error.message);
      drawer.dataset.state = error.code === 'NOT_FOUND' ? 'loaded' : 'error';
    }
  },

  // One item per branch: each tip of the tree, and the active leaf when a fork left it
  // with nothing after it yet. Each names where it left its parent branch.
  branchItems(nodes) {
    if (!nodes.length) return [h('li', { class: 'muted' }, 'No messages yet.')];
    const byId = new Map(nodes.map((node) => [node.id, node]));
    const tips = nodes.filter((node) => node.children === 0 || node.leaf);
    return tips.map((tip, index) => {
      let point = null;
      let label = null;
      for (let node = tip; node; node = byId.get(node.parent)) {
        if (!label && node.kind === 'message' && node.text) label = node;
        if (node !== tip && node.children > 1) { point = node; break; }
      }
      const active = Boolean(tip.leaf);
      const fresh = active && tip.children > 0;
      const heading = 'Branch ' + (index + 1) + (active ? ' (active)' : '');
      const summary = fresh ? 'new branch after: ' + (tip.text || tip.kind) : (label ? label.text : tip.kind);
      return h('li', {
        class: 'branch-item' + (active ? ' active' : ''), 'data-testid': 'branch',
        'data-active': String(active), 'data-entry-id': tip.id,
      },
      h('span', { class: 'branch-name' }, heading),
      h('span', { class: 'branch-text' }, summary),
      point ? h('span', { class: 'muted branch-point' }, 'forks at: ' + (point.text || point.kind)) : null,
      h('span', { class: 'muted' }, formatTime(tip.timestamp)),
      active ? null : h('button', {
        type: 'button', class: 'secondary', 'data-testid': 'branch-switch',
        onclick: () => squidTree.switchTo(tip.id),
      }, 'Switch'));
    });
  },

  // Adds "Fork here" to a transcript bubble that names its entry.
  decorate(bubble) {
    const entry = bubble.dataset.entryId;
    if (!entry) return;
    bubble.append(h('button', {
      type: 'button', class: 'link fork', 'data-testid': 'fork-here',
      onclick: () => squidTree.fork(entry),
    }, 'Fork here'));
  },

  async move(method, entryId, verb) {
    if (chat.sending || chat.running.size) return;
    show($('chat-error'), '');
    try {
      await request(method, { key: chat.session, entryId });
    } catch (error) {
      show($('chat-error'), "can't " + verb + ': ' + error.message);
      return;
    }
    await loadChatHistory();
    squidTree.refresh();
  },

  fork(entryId) {
    return squidTree.move('sessions.fork', entryId, 'fork');
  },

  switchTo(entryId) {
    return squidTree.move('sessions.switch', entryId, 'switch branch');
  },

  // Asks for the export and downloads it through a blob: URL (no inline script, no
  // server markup in this page: the document only lives in the downloaded file).
  async exportSession() {
    const format = $('chat-export-format').value === 'html' ? 'html' : 'md';
    show($('chat-branches-error'), '');
    try {
      const result = await request('sessions.export', { key: chat.session, format });
      const type = format === 'html' ? 'text/html;charset=utf-8' : 'text/markdown;charset=utf-8';
      if (squidTree.exportUrl) URL.revokeObjectURL(squidTree.exportUrl);
      squidTree.exportUrl = URL.createObjectURL(new Blob([result.text || ''], { type }));
      const name = chat.session.replace(/[^A-Za-z0-9._-]+/g, '_') + '.' + format;
      const link = $('chat-export-link');
      link.href = squidTree.exportUrl;
      link.download = name;
      link.dataset.format = format;
      link.dataset.bytes = String((result.text || '').length);
      link.textContent = 'Download ' + name;
      link.hidden = false;
      link.click();
    } catch (error) {
      show($('chat-branches-error'), "can't export: " + error.message);
    }
  },
};

// Files waiting to go with the next message: read in the page, sent as base64 with
// `chat.send`, kept by the gateway in the session's files directory.
const squidUploads = {
  // The gateway takes at most this much (decoded) with one message.
  maxBytes: 640 * 1024,
  maxFiles: 8,
  files: [],

  init() {
    $('chat-file').addEventListener('change', (event) => {
      squidUploads.add(event.target.files);
      event.target.value = '';
    });
    $('chat-input').addEventListener('paste', (event) => {
      const files = event.clipboardData ? event.clipboardData.files : null;
      if (files && files.length) { event.preventDefault(); squidUploads.add(files); }
    });
    const form = $('chat-form');
    form.addEventListener('dragover', (event) => event.preventDefault());
    form.addEventListener('drop', (event) => {
      if (!event.dataTransfer || !event.dataTransfer.files.length) return;
      event.preventDefault();
      squidUploads.add(event.dataTransfer.files);
    });
  },

  read(file) {
    return new Promise((resolve, reject) => {
      const reader = new FileReader();
      reader.onload = () => {
        const url = String(reader.result);
        resolve(url.slice(url.indexOf(',') + 1));
      };
      reader.onerror = () => reject(reader.error);
      reader.readAsDataURL(file);
    });
  },

  async add(fileList) {
    show($('chat-error'), '');
    for (const file of Array.from(fileList || [])) {
      const used = squidUploads.files.reduce((sum, upload) => sum + upload.size, 0);
      if (squidUploads.files.length >= squidUploads.maxFiles) {
        show($('chat-error'), "can't attach " + file.name + ': at most ' + squidUploads.maxFiles + ' files per message');
        break;
      }
      if (used + file.size > squidUploads.maxBytes) {
        show($('chat-error'), "can't attach " + file.name + ': files sent together may hold at most '
          + Math.round(squidUploads.maxBytes / 1024) + ' KiB');
        continue;
      }
      try {
        const content = await squidUploads.read(file);
        squidUploads.files.push({ name: file.name, mime: file.type || 'application/octet-stream', size: file.size, content });
      } catch (error) {
        show($('chat-error'), "can't read " + file.name + ': ' + error.message);
      }
    }
    squidUploads.render();
  },

  render() {
    const list = $('chat-attachments');
    list.replaceChildren(...squidUploads.files.map((upload, index) => h('li', { 'data-testid': 'chat-attachment' },
      h('span', {}, upload.name + ' (' + Math.max(1, Math.round(upload.size / 1024)) + ' KiB)'),
      h('button', {
        type: 'button', class: 'link', 'aria-label': 'Remove ' + upload.name,
        onclick: () => { squidUploads.files.splice(index, 1); squidUploads.render(); },
      }, 'Remove'))));
    list.hidden = !squidUploads.files.length;
  },

  // What `chat.send {attachments}` takes.
  pending() {
    return squidUploads.files.map(({ name, mime, content }) => ({ name, mime, content }));
  },

  clear() {
    squidUploads.files = [];
    squidUploads.render();
  },
};
