// The gateway's own answering page: follows /event, renders each pending request as a form built from
// GET /question/{id}/form, and posts replies and rejections. Plain script, no build step.
//
// Every URL is relative and same-origin, so the page works behind a path prefix and the browser sends
// the answerer credentials (HTTP Basic) by itself. Text from tools only ever goes into textContent,
// made safe to show first (`shown`, the rules of elicitation_gateway/display.py).
"use strict";

(() => {
  const pageQuery = new URLSearchParams(window.location.search);
  const directory = pageQuery.get("directory");
  // A notification links to one question (`?question=que_…`): it is brought into view once shown.
  let linked = pageQuery.get("question");

  const RETRY_FIRST_MS = 1000;
  const RETRY_MAX_MS = 30000;
  const NOTICE_MS = 6000;

  const FORMAT_WORDS = {
    email: "An email address",
    uri: "A web address (URL)",
    date: "A date",
    "date-time": "A date and time",
  };
  const INPUT_TYPES = { email: "email", uri: "url", date: "date", "date-time": "datetime-local" };
  const dom = {
    list: document.getElementById("questions"),
    empty: document.getElementById("empty"),
    summary: document.getElementById("summary"),
    connection: document.getElementById("connection"),
    connectionText: document.getElementById("connection-text"),
    offline: document.getElementById("offline"),
    notices: document.getElementById("notices"),
  };

  /** id -> {id, status: "loading" | "shown", element, spec, action} */
  const cards = new Map();
  let source = null;
  let lastEventId = "";
  let everConnected = false;
  let retryDelay = RETRY_FIRST_MS;
  let retryTimer = null;
  let generation = 0;
  let stale = null;

  // ----------------------------------------------------------------------------------------------
  // Tool text made safe to show: the rules of elicitation_gateway/display.py, which a test checks
  // against this copy. Control characters go (but the newline; a tab is a space; a carriage return,
  // a line or a paragraph separator a newline); characters that would disguise text (bidi controls,
  // invisible format characters, Hangul fillers) show as a marker such as ⟨U+202E⟩. A zero-width
  // joiner between two symbols and one variation selector after a visible character stay, for emoji.

  // Unicode 15.1's format characters (Cf), as display.py's FORMAT_CHARACTERS, and the Hangul fillers.
  const FORMAT = new RegExp(
    "^[\\u00ad\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u0890\\u0891\\u08e2\\u180e\\u200b-\\u200f\\u202a-\\u202e" +
      "\\u2060-\\u2064\\u2066-\\u206f\\ufeff\\ufff9-\\ufffb\\u{110bd}\\u{110cd}\\u{13430}-\\u{1343f}" +
      "\\u{1bca0}-\\u{1bca3}\\u{1d173}-\\u{1d17a}\\u{e0001}\\u{e0020}-\\u{e007f}\\u115f\\u1160\\u3164\\uffa0]$",
    "u",
  );
  const VARIATION = /^\p{Variation_Selector}$/u;
  const SYMBOL = /^[\p{So}\p{Sk}]$/u;
  const JOINER = "\u200d";
  const GRAPHEME_JOINER = "\u034f";

  function isSymbol(char) {
    const code = char.codePointAt(0);
    return SYMBOL.test(char) || (code >= 0xfe00 && code <= 0xfe0f);
  }

  function marker(char) {
    return `⟨U+${char.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}⟩`;
  }

  /** Step one: controls removed but the newline; tab, carriage return, line and paragraph
   *  separators mapped. */
  function withoutControls(text) {
    let out = "";
    for (const char of text.replaceAll("\r\n", "\n")) {
      const code = char.codePointAt(0);
      if (char === "\n") out += char;
      else if (char === "\t") out += " ";
      else if (char === "\r" || char === "\u2028" || char === "\u2029") out += "\n";
      else if (code < 0x20 || (code >= 0x7f && code <= 0x9f)) continue;
      else out += char;
    }
    return out;
  }

  /** Step two: the special characters marked, but a joiner between two symbols and one variation
   *  selector after a visible character. */
  function shown(text, oneline = false) {
    const chars = Array.from(withoutControls(String(text)));
    const out = [];
    let before = "";
    chars.forEach((char, index) => {
      let piece = char;
      if (char === JOINER) {
        const after = chars[index + 1] || "";
        piece = before && after && isSymbol(before) && isSymbol(after) ? char : marker(char);
      } else if (VARIATION.test(char)) {
        const kept = before && before !== "\n" && before !== "⟩" && !VARIATION.test(before);
        piece = kept ? char : marker(char);
      } else if (FORMAT.test(char) || char === GRAPHEME_JOINER) piece = marker(char);
      out.push(piece);
      before = Array.from(piece).pop();
    });
    const result = out.join("");
    return oneline ? result.replaceAll("\n", " ") : result;
  }
  window.gatewayShown = shown; // for the page's test, which checks it against display.py

  // ----------------------------------------------------------------------------------------------
  // Small DOM helpers

  /** Create an element; strings among children become text nodes, never markup, and every text is
   *  made safe to show. */
  function el(tag, attributes = {}, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) {
      if (value === undefined || value === null || value === false) continue;
      if (name === "text") node.textContent = shown(value);
      else if (name === "className") node.className = value;
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(typeof child === "string" ? document.createTextNode(shown(child)) : child);
    }
    return node;
  }

  function quoted(text) {
    const short = text.length > 60 ? `${text.slice(0, 59)}…` : text;
    return `“${short}”`;
  }

  function sentence(text) {
    return text ? text.charAt(0).toUpperCase() + text.slice(1) : text;
  }

  function plural(count, one, many) {
    return `${count} ${count === 1 ? one : many}`;
  }

  function pad(number, width = 2) {
    return String(number).padStart(width, "0");
  }

  // ----------------------------------------------------------------------------------------------
  // Connection

  function setConnection(state) {
    const words = { connecting: "Connecting…", live: "Live", reconnecting: "Reconnecting…" };
    dom.connection.dataset.state = state;
    dom.connectionText.textContent = words[state];
    dom.offline.hidden = state !== "reconnecting";
    dom.offline.textContent = everConnected
      ? "The connection to the gateway was lost. Reconnecting by itself; " +
        "the questions below may be out of date."
      : "The gateway cannot be reached yet. Trying again by itself.";
  }

  function connect() {
    clearTimeout(retryTimer);
    retryTimer = null;
    if (source) source.close();
    const query = new URLSearchParams();
    if (directory) query.set("directory", directory);
    // A fresh EventSource forgets the last id; the query carries it (the header wins once it has one).
    if (lastEventId) query.set("last_event_id", lastEventId);
    const search = query.toString();
    const stream = new EventSource(search ? `event?${search}` : "event");
    source = stream;
    setConnection(everConnected ? "reconnecting" : "connecting");
    stream.onmessage = (message) => {
      if (stream !== source) return;
      if (message.lastEventId) lastEventId = message.lastEventId;
      let event;
      try {
        event = JSON.parse(message.data);
      } catch {
        return;
      }
      handleEvent(event);
    };
    stream.onerror = () => {
      if (stream !== source) return;
      setConnection("reconnecting");
      // The browser retries a dropped stream by itself; one it gave up on (an error status) is ours.
      if (stream.readyState === EventSource.CLOSED) scheduleReconnect();
    };
  }

  function scheduleReconnect() {
    if (retryTimer) return;
    retryTimer = setTimeout(connect, retryDelay);
    retryDelay = Math.min(retryDelay * 2, RETRY_MAX_MS);
  }

  window.addEventListener("online", () => {
    if (dom.connection.dataset.state !== "live") connect();
  });

  function handleEvent(event) {
    const properties = event.properties || {};
    switch (event.type) {
      case "server.connected":
        everConnected = true;
        retryDelay = RETRY_FIRST_MS;
        setConnection("live");
        updateSummary();
        resynchronize();
        break;
      case "question.asked":
        if (stale) stale.delete(properties.id);
        if (properties.id && !cards.has(properties.id)) addRequest(properties.id);
        break;
      case "question.replied":
        finish(properties.requestID, "replied", properties.answeredBy);
        break;
      case "question.rejected":
        finish(properties.requestID, "rejected", properties.answeredBy);
        break;
      default:
        break;
    }
  }

  /**
   * After a (re)connect, the stream replays what was missed or re-announces what is pending; the list
   * also catches a server that restarted without saying goodbye: cards it no longer knows go away.
   */
  async function resynchronize() {
    const mine = ++generation;
    stale = new Set(cards.keys());
    let pending;
    try {
      const url = directory ? `question?directory=${encodeURIComponent(directory)}` : "question";
      const response = await fetch(url, { headers: { Accept: "application/json" }, cache: "no-store" });
      if (!response.ok) return;
      pending = await response.json();
    } catch {
      return;
    }
    if (mine !== generation || !Array.isArray(pending)) return;
    const listed = new Set(pending.map((request) => request.id));
    for (const id of stale) {
      if (!listed.has(id)) finish(id, "rejected");
    }
    stale = null;
    for (const request of pending) {
      if (!cards.has(request.id)) addRequest(request.id);
    }
  }

  // ----------------------------------------------------------------------------------------------
  // Cards

  async function addRequest(id) {
    const card = { id, status: "loading", element: null, spec: null, action: null };
    cards.set(id, card);
    let spec;
    try {
      const response = await fetch(`question/${encodeURIComponent(id)}/form`, {
        headers: { Accept: "application/json" },
        cache: "no-store",
      });
      if (response.status === 404) {
        if (cards.get(id) === card) cards.delete(id);
        return;
      }
      if (!response.ok) throw new Error(`status ${response.status}`);
      spec = await response.json();
    } catch {
      if (cards.get(id) === card) {
        cards.delete(id);
        // Try again on the next (re)connect, or shortly, whichever comes first.
        setTimeout(() => {
          if (!cards.has(id)) addRequest(id);
        }, 3000);
      }
      return;
    }
    if (cards.get(id) !== card) return; // answered or rejected while loading
    card.spec = spec;
    card.element = renderCard(card);
    card.status = "shown";
    insertSorted(card.element, id);
    updateSummary();
    if (id === linked) {
      linked = null;
      card.element.scrollIntoView({ block: "start" });
      card.element.querySelector("h2").focus({ preventScroll: true });
    }
  }

  function insertSorted(element, id) {
    // Ids sort in creation order: oldest first, as GET /question lists them.
    const after = [...dom.list.children].find((child) => child.dataset.requestId > id);
    dom.list.insertBefore(element, after || null);
  }

  const OUR_NOTICES = {
    reply: (title) => `Answer sent: ${title}`,
    decline: (title) => `Declined: ${title}`,
    dismiss: (title) => `Dismissed: ${title}`,
  };

  /** A request is over: remove its card and say why (and who, where a person signed in), once. */
  function finish(id, how, by) {
    const card = cards.get(id);
    if (!card) return;
    cards.delete(id);
    if (stale) stale.delete(id);
    if (card.status !== "shown") return;
    const title = quoted(card.title);
    let notice;
    if (card.action) notice = OUR_NOTICES[card.action](title);
    else if (how === "replied" && typeof by === "string") notice = `Answered by ${by}: ${title}`;
    else if (how === "replied") notice = `Answered elsewhere: ${title}`;
    else if (how === "rejected" && typeof by === "string") notice = `Declined or dismissed by ${by}: ${title}`;
    else if (how === "gone") notice = `No longer waiting: ${title}`;
    else notice = `Closed elsewhere or timed out: ${title}`;
    const hadFocus = card.element.contains(document.activeElement);
    const next = card.element.nextElementSibling || card.element.previousElementSibling;
    card.element.remove();
    updateSummary();
    showNotice(notice);
    if (hadFocus) {
      const target = next ? next.querySelector("h2") : dom.empty;
      target.focus();
    }
  }

  function updateSummary() {
    const count = dom.list.children.length;
    dom.empty.hidden = count > 0 || !everConnected; // "nothing to answer" only once it is known
    dom.summary.hidden = count === 0;
    dom.summary.textContent = `${plural(count, "request", "requests")} waiting for an answer`;
    const name = "Questions · Elicitation Gateway";
    document.title = count ? `(${count}) ${name}` : name;
  }

  function showNotice(text) {
    const notice = el("p", { className: "notice", text });
    dom.notices.append(notice);
    while (dom.notices.children.length > 3) dom.notices.firstElementChild.remove();
    setTimeout(() => notice.remove(), NOTICE_MS);
  }

  // ----------------------------------------------------------------------------------------------
  // Rendering one request

  function renderCard(card) {
    const { spec } = card;
    const fields = spec.fields || [];
    const message = (spec.message || "").trim();
    // A plain confirmation (a schema with no properties): the message is the question, and Yes and No
    // are the buttons that send it (Yes accepts, No declines), with no form of questions above them.
    const confirm = spec.confirm === true && fields.length === 1;
    const fallback = confirm ? fields[0].question : fields[0] && fields[0].header;
    card.title = message || fallback || "Question";
    const base = `r-${spec.id}`;
    const titleId = `${base}-title`;

    const expires = el("span", {
      className: "expires",
      "data-expires-at": spec.expiresAt,
      "data-on-timeout": spec.onTimeout || "cancel",
      title:
        spec.onTimeout === "default"
          ? "Unanswered by then, the tool gets the defaults shown"
          : "Unanswered by then, the tool is told nobody answered",
    });
    updateExpiry(expires);
    const meta = el(
      "p",
      { className: "card-meta" },
      el("span", { text: confirm ? "Yes or no" : plural(fields.length, "question", "questions") }),
      // Whom it is for, where the gateway has people (docs/teams.md).
      spec.to && spec.to.length ? el("span", { className: "card-to", text: `For ${spec.to.join(", ")}` }) : null,
      expires,
    );
    const heading = el("h2", { id: titleId, className: "card-title", tabindex: "-1", text: card.title });
    // Who asks: a line and a style of its own, above the message, which no text of the message has.
    const asker = spec.asker
      ? el(
          "p",
          { className: "card-asker" },
          el("span", { className: "asker-label", text: "Asked by" }),
          el("span", { className: "asker-name", text: shown(spec.asker, true) }),
        )
      : null;

    const form = el("form", { className: "card-form", novalidate: true, "aria-labelledby": titleId });
    if (confirm) {
      const own = message ? questionText(fields[0]) : ""; // the schema's own words, beside the message
      if (own) form.append(el("p", { className: "question-text", text: own }));
    } else {
      fields.forEach((field, index) => {
        form.append(renderQuestion(field, index, `${base}-q${index}`));
      });
    }
    const formError = el("p", { className: "form-error", role: "alert", hidden: true });
    const submit = el("button", {
      type: "submit",
      className: "button primary",
      text: confirm ? "Yes" : "Submit",
      title: confirm ? "Say yes: the tool goes ahead" : null,
    });
    const decline = el("button", {
      type: "button",
      className: "button secondary",
      text: confirm ? "No" : "Decline",
      title: "Say no: the tool learns that you declined",
    });
    const dismiss = el("button", {
      type: "button",
      className: "button quiet",
      text: "Dismiss",
      title: "Close without answering",
    });
    form.append(formError, el("div", { className: "actions" }, submit, decline, dismiss));

    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (confirm) sendConfirmation(card, "Yes");
      else sendReply(card);
    });
    decline.addEventListener("click", () => {
      if (confirm) sendConfirmation(card, "No");
      else sendReject(card, "decline");
    });
    dismiss.addEventListener("click", () => sendReject(card, "dismiss"));
    form.addEventListener("input", (event) => clearIssue(event.target));
    form.addEventListener("change", (event) => clearIssue(event.target));

    return el(
      "article",
      { className: "card", "data-request-id": spec.id, "aria-labelledby": titleId },
      el("header", { className: "card-head" }, meta, asker, heading),
      form,
    );
  }

  function updateExpiry(node) {
    const at = Number(node.dataset.expiresAt) * 1000;
    if (!at) return;
    const seconds = Math.round((at - Date.now()) / 1000);
    const what = node.dataset.onTimeout === "default" ? "defaults sent" : "expires";
    let when;
    if (seconds <= 60) when = "in under a minute";
    else if (seconds < 90 * 60) when = `in ${Math.round(seconds / 60)} min`;
    else when = `at ${new Date(at).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })}`;
    node.textContent = `${what} ${when}`;
  }

  setInterval(() => document.querySelectorAll(".expires").forEach(updateExpiry), 15000);

  /** The question's own words (the form's `text`: without the message, shown as the card's title, and
   *  without the server's hints, since the page shows its own); nothing when they only repeat the header. */
  function questionText(field) {
    const text = (field.text || "").trim();
    return text === field.header ? "" : text;
  }

  function renderQuestion(field, index, id) {
    const grouped = ["choice", "multi", "boolean"].includes(field.kind);
    const textId = `${id}-text`;
    const hintId = `${id}-hint`;
    const warningId = `${id}-warning`;
    const errorId = `${id}-error`;
    const text = questionText(field);

    const heading = el(
      grouped ? "legend" : "label",
      { className: "question-header", for: grouped ? null : `${id}-input` },
      el("span", { text: field.header || field.key }),
      field.required ? el("span", { className: "badge", text: "Required" }) : null,
    );
    const description = text ? el("p", { className: "question-text", id: textId, text }) : null;
    // The gateway's caution when the question may ask for a secret: beside the question, and read
    // with its input. (The form's `text` never carries it; `question` does, for OpenCode clients.)
    const warning = field.warning
      ? el("p", { className: "question-warning", id: warningId, role: "note", text: field.warning })
      : null;
    const hint = el("p", { className: "hint", id: hintId });
    const error = el("p", { className: "issue", id: errorId, hidden: true });
    const describedBy = [description ? textId : null, warning ? warningId : null, hintId, errorId]
      .filter(Boolean)
      .join(" ");

    const control = renderControl(field, id, describedBy, hint);
    if (!hint.textContent) hint.hidden = true;

    const wrapper = el(
      grouped ? "fieldset" : "div",
      {
        className: `question kind-${field.kind}`,
        "data-index": index,
        "data-key": field.key,
        "aria-describedby": grouped ? describedBy : null,
      },
      heading,
      description,
      warning,
      control,
      hint,
      error,
    );
    return wrapper;
  }

  function renderControl(field, id, describedBy, hint) {
    switch (field.kind) {
      case "choice":
        return renderOptions(field, id, "radio", hint);
      case "boolean":
        return renderOptions(
          {
            ...field,
            options: [
              { value: "true", label: "Yes", description: "" },
              { value: "false", label: "No", description: "" },
            ],
            default: "default" in field ? String(field.default) : undefined,
          },
          id,
          "radio",
          hint,
          "yes-no",
        );
      case "multi":
        return renderOptions(field, id, "checkbox", hint);
      case "integer":
      case "number":
        return renderNumber(field, id, describedBy, hint);
      default:
        return renderText(field, id, describedBy, hint);
    }
  }

  function renderOptions(field, id, type, hint, extraClass = "") {
    const defaults = new Set(
      Array.isArray(field.default) ? field.default : field.default === undefined ? [] : [field.default],
    );
    const options = (field.options || []).map((option, position) => {
      const inputId = `${id}-o${position}`;
      const descriptionId = `${inputId}-description`;
      const labelId = `${inputId}-label`;
      const input = el("input", {
        type,
        id: inputId,
        name: id,
        value: option.label,
        checked: defaults.has(option.value),
        // Named by the label alone; the description is read after it.
        "aria-labelledby": labelId,
        "aria-describedby": option.description ? descriptionId : null,
      });
      return el(
        "label",
        { className: "option", for: inputId },
        input,
        el(
          "span",
          { className: "option-body" },
          el("span", { className: "option-label", id: labelId, text: option.label }),
          option.description
            ? el("span", { className: "option-description", id: descriptionId, text: option.description })
            : null,
        ),
      );
    });
    const group = el("div", { className: `options ${extraClass}`.trim() }, options);

    if (type === "checkbox") {
      const chosen = el("span", { className: "counter" });
      const refresh = () => {
        chosen.textContent = `${group.querySelectorAll("input:checked").length} chosen`;
      };
      group.addEventListener("change", refresh);
      refresh();
      setHint(hint, countWords(field.minItems, field.maxItems), chosen);
      return group;
    }
    if (!field.required && !("default" in field)) {
      // A radio cannot be unchecked; an optional question needs a way back to "no answer".
      const clear = el("button", { type: "button", className: "link-button", text: "Clear choice" });
      const refresh = () => {
        clear.hidden = !group.querySelector("input:checked");
      };
      clear.addEventListener("click", () => {
        group.querySelectorAll("input:checked").forEach((input) => {
          input.checked = false;
        });
        refresh();
        const first = group.querySelector("input");
        if (first) first.focus();
      });
      group.addEventListener("change", refresh);
      refresh();
      return el("div", {}, group, clear);
    }
    return group;
  }

  /** A hint line: what is allowed, and on the right a live count where one helps. */
  function setHint(hint, text, counter = null) {
    hint.replaceChildren();
    if (text) hint.append(el("span", { className: "hint-text", text }));
    if (counter) hint.append(counter);
  }

  function countWords(min, max) {
    const low = min || 0;
    if (max !== undefined && low === max) return `Choose ${low}`;
    if (max !== undefined && low > 0) return `Choose ${low} to ${max}`;
    if (low > 0) return `Choose at least ${low}`;
    if (max !== undefined) return `Choose up to ${max}`;
    return "Choose any";
  }

  function renderNumber(field, id, describedBy, hint) {
    const whole = field.kind === "integer";
    const input = el("input", {
      type: "number",
      id: `${id}-input`,
      name: id,
      className: "input number",
      inputmode: whole ? "numeric" : "decimal",
      step: whole ? "1" : "any",
      min: field.minimum,
      max: field.maximum,
      required: field.required,
      "aria-describedby": describedBy,
      autocomplete: "off",
    });
    if ("default" in field) input.value = shown(String(field.default));
    const range = [];
    if (field.minimum !== undefined && field.maximum !== undefined) {
      range.push(`from ${field.minimum} to ${field.maximum}`);
    } else {
      if (field.minimum !== undefined) range.push(`at least ${field.minimum}`);
      if (field.exclusiveMinimum !== undefined) range.push(`greater than ${field.exclusiveMinimum}`);
      if (field.maximum !== undefined) range.push(`at most ${field.maximum}`);
    }
    if (field.minimum !== undefined && field.maximum !== undefined && field.exclusiveMinimum !== undefined) {
      range.push(`greater than ${field.exclusiveMinimum}`);
    }
    if (field.exclusiveMaximum !== undefined) range.push(`less than ${field.exclusiveMaximum}`);
    if (field.multipleOf !== undefined) range.push(`a multiple of ${field.multipleOf}`);
    setHint(hint, [whole ? "A whole number" : "A number", range.join(", ")].filter(Boolean).join(" "));
    return input;
  }

  function renderText(field, id, describedBy, hint) {
    const format = field.kind === "string" ? field.format : undefined;
    const long = field.kind === "text" || (!format && field.maxLength !== undefined && field.maxLength > 200);
    const attributes = {
      id: `${id}-input`,
      name: id,
      className: long ? "input textarea" : `input${format ? ` format-${format}` : ""}`,
      minlength: field.minLength,
      maxlength: field.maxLength,
      required: field.required,
      "aria-describedby": describedBy,
      spellcheck: format ? "false" : null,
    };
    let input;
    if (long) {
      input = el("textarea", { ...attributes, rows: 3 });
    } else {
      input = el("input", {
        ...attributes,
        type: INPUT_TYPES[format] || "text",
        step: format === "date-time" ? "1" : null,
        autocomplete: format === "email" ? "email" : "off",
      });
    }
    if (typeof field.default === "string") {
      input.value = format === "date-time" ? toLocalInput(field.default) : shown(field.default);
    }

    const words = [];
    if (format) words.push(FORMAT_WORDS[format]);
    const { minLength: low, maxLength: high } = field;
    if (low && high !== undefined) words.push(`${low}–${high} characters`);
    else if (low) words.push(`at least ${plural(low, "character", "characters")}`);
    else if (high !== undefined) words.push(`up to ${plural(high, "character", "characters")}`);
    if (field.pattern) words.push(`matching ${field.pattern}`);
    if (format === "date-time") words.push(`in your time zone (UTC${offsetWords(new Date())})`);
    let counter = null;
    if (high !== undefined && !format) {
      counter = el("span", { className: "counter" });
      const refresh = () => {
        counter.textContent = `${input.value.length}/${high}`;
      };
      input.addEventListener("input", refresh);
      refresh();
    }
    setHint(hint, sentence(words.join(", ")), counter);
    return input;
  }

  // ----------------------------------------------------------------------------------------------
  // Dates: the schema's date-time is RFC 3339 with an offset; the browser's input has neither.

  function offsetWords(date) {
    const minutes = -date.getTimezoneOffset();
    const sign = minutes >= 0 ? "+" : "-";
    const abs = Math.abs(minutes);
    return `${sign}${pad(Math.floor(abs / 60))}:${pad(abs % 60)}`;
  }

  /** "2026-03-01T09:30" (local) -> "2026-03-01T09:30:00+01:00". */
  function withOffset(local) {
    const match = /^(\d{4,})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?(?:\.\d+)?$/.exec(local);
    if (!match) return local;
    const [, year, month, day, hour, minute, second = "00"] = match;
    const [y, mo, d, h, mi, s] = [year, month, day, hour, minute, second].map(Number);
    const date = new Date(y, mo - 1, d, h, mi, s);
    return `${year}-${month}-${day}T${hour}:${minute}:${second}${offsetWords(date)}`;
  }

  /** An RFC 3339 date-time -> the local "YYYY-MM-DDTHH:MM:SS" a datetime-local input shows. */
  function toLocalInput(text) {
    const date = new Date(text);
    if (Number.isNaN(date.getTime())) return "";
    return (
      `${pad(date.getFullYear(), 4)}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}` +
      `T${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`
    );
  }

  // ----------------------------------------------------------------------------------------------
  // Answers

  /** One answer as the reply carries it: option labels, or the text; [] when unanswered. */
  function readAnswer(question, field) {
    if (["choice", "multi", "boolean"].includes(field.kind)) {
      return [...question.querySelectorAll("input:checked")].map((input) => input.value);
    }
    const input = question.querySelector(".input");
    if (input.validity && input.validity.badInput) return { problem: "Enter a number, or leave this empty" };
    const value = input.value;
    if (value === "") return [];
    return [field.kind === "string" && field.format === "date-time" ? withOffset(value) : value];
  }

  function questionsOf(card) {
    return [...card.element.querySelectorAll(".question")];
  }

  function setBusy(card, busy) {
    card.element.classList.toggle("busy", busy);
    card.element.setAttribute("aria-busy", String(busy));
    card.element.querySelectorAll(".actions button").forEach((button) => {
      button.disabled = busy;
    });
  }

  function clearIssues(card) {
    questionsOf(card).forEach((question) => showIssue(question, ""));
    showFormError(card, "");
  }

  function clearIssue(target) {
    const question = target.closest && target.closest(".question");
    if (question) showIssue(question, "");
  }

  function showIssue(question, message) {
    const issue = question.querySelector(".issue");
    issue.textContent = shown(sentence(message));
    issue.hidden = !message;
    question.classList.toggle("invalid", Boolean(message));
    question.querySelectorAll("input, textarea").forEach((input) => {
      if (message) input.setAttribute("aria-invalid", "true");
      else input.removeAttribute("aria-invalid");
    });
  }

  function showFormError(card, message) {
    const error = card.element.querySelector(".form-error");
    error.textContent = shown(message);
    error.hidden = !message;
  }

  function focusFirstInvalid(card) {
    const first = card.element.querySelector(".question.invalid input, .question.invalid textarea");
    if (first) first.focus();
  }

  async function sendReply(card) {
    if (card.status !== "shown" || card.action) return;
    clearIssues(card);
    const questions = questionsOf(card);
    const answers = [];
    let local = 0;
    card.spec.fields.forEach((field, index) => {
      const answer = readAnswer(questions[index], field);
      if (Array.isArray(answer)) {
        answers.push(answer);
      } else {
        showIssue(questions[index], answer.problem);
        local += 1;
      }
    });
    if (local) {
      showFormError(card, `Please check ${plural(local, "answer", "answers")}.`);
      focusFirstInvalid(card);
      return;
    }
    await post(card, "reply", `question/${encodeURIComponent(card.id)}/reply`, { answers });
  }

  /** A plain confirmation's answer, as any OpenCode client sends it: the gateway turns Yes into accept
   *  and No into decline. */
  async function sendConfirmation(card, label) {
    if (card.status !== "shown" || card.action) return;
    clearIssues(card);
    const action = label === "Yes" ? "reply" : "decline";
    await post(card, action, `question/${encodeURIComponent(card.id)}/reply`, { answers: [[label]] });
  }

  async function sendReject(card, action) {
    if (card.status !== "shown" || card.action) return;
    clearIssues(card);
    await post(
      card,
      action,
      `question/${encodeURIComponent(card.id)}/reject`,
      action === "decline" ? { action: "decline" } : undefined,
    );
  }

  async function post(card, action, url, body) {
    card.action = action;
    setBusy(card, true);
    let response;
    let payload = null;
    try {
      // X-Gateway-Via: the audit trail records that the answer came from this page.
      const init = { method: "POST", headers: { Accept: "application/json", "X-Gateway-Via": "page" } };
      if (body !== undefined) {
        init.headers["Content-Type"] = "application/json";
        init.body = JSON.stringify(body);
      }
      response = await fetch(url, init);
      payload = await response.json().catch(() => null);
    } catch {
      card.action = null;
      setBusy(card, false);
      showFormError(card, "The gateway could not be reached. Your answers are still here: try again.");
      return;
    }
    if (response.ok) {
      finish(card.id, "done");
      return;
    }
    card.action = null;
    if (!cards.has(card.id)) return;
    setBusy(card, false);
    if (response.status === 404) {
      finish(card.id, "gone");
      return;
    }
    const data = (payload && payload.data) || {};
    const issues = Array.isArray(data.issues) ? data.issues : [];
    const questions = questionsOf(card);
    let placed = 0;
    for (const issue of issues) {
      const question = questions[issue.index];
      if (question) {
        showIssue(question, issue.message || "This answer does not fit");
        placed += 1;
      }
    }
    if (placed) {
      showFormError(card, `Please check ${plural(placed, "answer", "answers")}.`);
      focusFirstInvalid(card);
    } else {
      const message =
        data.message || (payload && payload.message) || `The gateway answered ${response.status}.`;
      showFormError(card, sentence(message));
    }
  }

  // ----------------------------------------------------------------------------------------------

  updateSummary();
  connect();
})();
