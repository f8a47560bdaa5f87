// The published OpenCode SDK (its v2 client) against a running Elicitation Gateway.
//
// Run by tests/test_opencode_sdk.py, which starts the gateway and sets GATEWAY_URL; by hand:
//   GATEWAY_URL=http://127.0.0.1:4096 npm test --prefix tests/node
//
// Events, requests and replies are checked against the shapes that the SDK's types declare
// (node_modules/@opencode-ai/sdk/dist/v2/gen/types.gen.d.ts), transcribed below as checks.

import assert from "node:assert/strict"
import { test } from "node:test"
import { createOpencodeClient } from "@opencode-ai/sdk/v2"

const baseUrl = process.env.GATEWAY_URL
assert.ok(baseUrl, "GATEWAY_URL must name a running gateway, e.g. http://127.0.0.1:4096")

// ------------------------------------------------------------------------------------------------
// The SDK's declared types, as checks

const string = (value, path) => assert.equal(typeof value, "string", `${path} should be a string`)
const boolean = (value, path) => assert.equal(typeof value, "boolean", `${path} should be a boolean`)
const literal = (expected) => (value, path) => assert.equal(value, expected, `${path} should be ${expected}`)
const record = (value, path) =>
  assert.ok(value !== null && typeof value === "object" && !Array.isArray(value), `${path} should be an object`)
const array = (item) => (value, path) => {
  assert.ok(Array.isArray(value), `${path} should be an array`)
  value.forEach((entry, index) => item(entry, `${path}[${index}]`))
}
const object =
  (required, optional = {}) =>
  (value, path = "value") => {
    record(value, path)
    for (const [key, check] of Object.entries(required)) {
      assert.ok(key in value, `${path}.${key} is required`)
      check(value[key], `${path}.${key}`)
    }
    for (const [key, check] of Object.entries(optional)) {
      if (value[key] !== undefined) check(value[key], `${path}.${key}`)
    }
  }

const QuestionOption = object({ label: string, description: string })
const QuestionInfo = object(
  { question: string, header: string, options: array(QuestionOption) },
  { multiple: boolean, custom: boolean },
)
const QuestionTool = object({ messageID: string, callID: string })
const QuestionRequest = object({ id: string, sessionID: string, questions: array(QuestionInfo) }, { tool: QuestionTool })
const QuestionAnswer = array(string)
const QuestionNotFoundError = object({ _tag: literal("QuestionNotFoundError"), requestID: string, message: string })

const EventServerConnected = object({ id: string, type: literal("server.connected"), properties: record })
const EventQuestionAsked = object({ id: string, type: literal("question.asked"), properties: QuestionRequest })
const EventQuestionReplied = object({
  id: string,
  type: literal("question.replied"),
  properties: object({ sessionID: string, requestID: string, answers: array(QuestionAnswer) }),
})
const EventQuestionRejected = object({
  id: string,
  type: literal("question.rejected"),
  properties: object({ sessionID: string, requestID: string }),
})
const GlobalEvent = (payload) => object({ directory: string, payload }, { project: string, workspace: string })

// ------------------------------------------------------------------------------------------------
// A tool, and a reader of the SDK's event streams

const SCHEMA = {
  type: "object",
  properties: {
    model: { type: "string", title: "Model", enum: ["SY215C", "SY235C"] },
    symptoms: {
      type: "array",
      title: "Symptoms",
      items: { type: "string", enum: ["Black smoke", "Noise"] },
    },
    hours: { type: "integer", title: "Hours", minimum: 0, maximum: 20000 },
  },
  required: ["model", "hours"],
}

/** A tool asking through POST /elicit; resolves to the ElicitResult it receives. */
async function elicit(message, query = {}) {
  const url = new URL("/elicit", baseUrl)
  for (const [key, value] of Object.entries(query)) url.searchParams.set(key, value)
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ mode: "form", message, requestedSchema: SCHEMA }),
  })
  assert.equal(response.status, 200)
  return response.json()
}

/** Reads an SDK stream in the background; `next(type)` returns the next event of that type. */
class EventQueue {
  constructor(stream) {
    this.items = []
    this.waiters = []
    this.pumping = (async () => {
      for await (const item of stream) this.#push(item)
    })()
  }

  #push(item) {
    const waiter = this.waiters.shift()
    if (waiter) waiter(item)
    else this.items.push(item)
  }

  #take() {
    if (this.items.length) return Promise.resolve(this.items.shift())
    return new Promise((resolve) => this.waiters.push(resolve))
  }

  async next(type, ms = 5000) {
    let timer
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no ${type} event within ${ms} ms`)), ms)
    })
    try {
      while (true) {
        const item = await Promise.race([this.#take(), timeout])
        if ((item.payload ?? item).type === type) return item
      }
    } finally {
      clearTimeout(timer)
    }
  }
}

function subscribe(client, options = {}) {
  const abort = new AbortController()
  const streams = client.event.subscribe(undefined, { signal: abort.signal, ...options })
  return streams.then(({ stream }) => ({ events: new EventQueue(stream), close: () => abort.abort() }))
}

// ------------------------------------------------------------------------------------------------

test("event.subscribe, question.list and question.reply: the tool gets typed content", async () => {
  const client = createOpencodeClient({ baseUrl })
  const { events, close } = await subscribe(client)
  try {
    EventServerConnected(await events.next("server.connected"), "server.connected")

    const tool = elicit("Excavator diagnosis")
    const asked = await events.next("question.asked")
    EventQuestionAsked(asked, "question.asked")
    const request = asked.properties
    assert.deepEqual(
      request.questions.map((q) => q.header),
      ["Model", "Symptoms", "Hours"],
    )
    assert.equal(request.questions[1].multiple, true)

    const listed = await client.question.list()
    assert.equal(listed.response.status, 200)
    array(QuestionRequest)(listed.data, "question.list()")
    assert.deepEqual(listed.data, [request])

    const answers = [["SY215C"], ["Black smoke", "Noise"], ["1200"]]
    const replied = await client.question.reply({ requestID: request.id, answers })
    assert.equal(replied.response.status, 200)
    assert.equal(replied.data, true)

    const event = await events.next("question.replied")
    EventQuestionReplied(event, "question.replied")
    assert.deepEqual(event.properties, { sessionID: request.sessionID, requestID: request.id, answers })

    assert.deepEqual(await tool, {
      action: "accept",
      content: { model: "SY215C", symptoms: ["Black smoke", "Noise"], hours: 1200 },
    })
    assert.deepEqual((await client.question.list()).data, [])
  } finally {
    close()
  }
})

test("global.event and question.reject: wrapped events, and the tool gets cancel", async () => {
  const client = createOpencodeClient({ baseUrl })
  const abort = new AbortController()
  const { stream } = await client.global.event({ signal: abort.signal })
  const events = new EventQueue(stream)
  try {
    const connected = await events.next("server.connected")
    EventServerConnected(connected.payload, "server.connected payload")
    assert.equal(connected.directory, undefined, "server.* events name no directory (as OpenCode's)")

    const tool = elicit("Pick one", { directory: "/srv/fleet" })
    const asked = await events.next("question.asked")
    GlobalEvent(EventQuestionAsked)(asked, "question.asked")
    assert.equal(asked.directory, "/srv/fleet")

    const requestID = asked.payload.properties.id
    const rejected = await client.question.reject({ requestID })
    assert.equal(rejected.response.status, 200)
    assert.equal(rejected.data, true)

    const event = await events.next("question.rejected")
    GlobalEvent(EventQuestionRejected)(event, "question.rejected")
    assert.equal(event.directory, "/srv/fleet")
    assert.deepEqual(event.payload.properties, { sessionID: asked.payload.properties.sessionID, requestID })

    assert.deepEqual(await tool, { action: "cancel" })
  } finally {
    abort.abort()
  }
})

test("question.reply errors: an unknown request, and answers that do not fit", async () => {
  const client = createOpencodeClient({ baseUrl })
  const unknown = await client.question.reply({ requestID: "que_000000000000Unknown0000000", answers: [] })
  assert.equal(unknown.response.status, 404)
  QuestionNotFoundError(unknown.error, "404 body")

  const { events, close } = await subscribe(client)
  try {
    const tool = elicit("Hours please")
    const { properties: request } = await events.next("question.asked")
    const wrong = await client.question.reply({ requestID: request.id, answers: [["SY215C"], [], ["lots"]] })
    assert.equal(wrong.response.status, 400)
    assert.equal(wrong.error.data.issues[0].header, "Hours")
    assert.equal((await client.question.list()).data.length, 1, "the question stays pending")

    await client.question.reply({ requestID: request.id, answers: [["SY235C"], [], ["7"]] })
    assert.deepEqual(await tool, { action: "accept", content: { model: "SY235C", hours: 7 } })
  } finally {
    close()
  }
})

test("a stream that reconnects with its Last-Event-ID receives what it missed", async () => {
  // The SDK's SSE client reconnects after a broken stream and sends the last id it saw as
  // Last-Event-ID. This fetch lets the test break the stream, and holds the reconnect back
  // until the test has done what the stream must then catch up on.
  const connections = []
  let allowReconnect
  const reconnectAllowed = new Promise((resolve) => (allowReconnect = resolve))
  const breakableFetch = async (request) => {
    connections.push({ lastEventID: request.headers.get("last-event-id") })
    if (connections.length > 1) await reconnectAllowed
    const response = await fetch(request)
    const reader = response.body.getReader()
    const body = new ReadableStream({
      start(controller) {
        connections.at(-1).cut = () => {
          controller.error(new Error("connection lost"))
          reader.cancel().catch(() => {})
        }
      },
      async pull(controller) {
        try {
          const { done, value } = await reader.read()
          if (done) controller.close()
          else controller.enqueue(value)
        } catch {
          // the connection was cut
        }
      },
      cancel: (reason) => reader.cancel(reason),
    })
    return new Response(body, { status: response.status, headers: response.headers })
  }

  const client = createOpencodeClient({ baseUrl, fetch: breakableFetch })
  const plain = createOpencodeClient({ baseUrl })
  const seenIDs = []
  const { events, close } = await subscribe(client, {
    sseDefaultRetryDelay: 10,
    onSseEvent: (event) => seenIDs.push(event.id),
  })
  try {
    await events.next("server.connected")
    const first = elicit("First")
    const firstAsked = await events.next("question.asked")
    const lastEventID = seenIDs.at(-1)
    assert.equal(lastEventID, firstAsked.id, "a question.asked frame carries its id in an id: line")

    connections[0].cut()
    // While the stream is down: a new question is asked, and the first one is answered.
    const second = elicit("Second")
    const pending = async () => (await plain.question.list()).data
    while ((await pending()).length < 2) await new Promise((resolve) => setTimeout(resolve, 20))
    await plain.question.reply({ requestID: firstAsked.properties.id, answers: [["SY215C"], [], ["1"]] })
    allowReconnect()

    await events.next("server.connected")
    assert.equal(connections.length, 2)
    assert.equal(connections[1].lastEventID, lastEventID)
    const missedAsked = await events.next("question.asked")
    EventQuestionAsked(missedAsked, "replayed question.asked")
    assert.notEqual(missedAsked.properties.id, firstAsked.properties.id)
    const missedReplied = await events.next("question.replied")
    EventQuestionReplied(missedReplied, "replayed question.replied")
    assert.equal(missedReplied.properties.requestID, firstAsked.properties.id)

    assert.equal((await first).action, "accept")
    await plain.question.reject({ requestID: missedAsked.properties.id })
    assert.deepEqual(await second, { action: "cancel" })
  } finally {
    close()
  }
})
