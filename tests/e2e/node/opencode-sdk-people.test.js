// The published OpenCode SDK, signed in as each person of a gateway with people (GATEWAY_PEOPLE).
//
// Run by tests/e2e/test_opencode_sdk.py, which starts a gateway with the people below and sets
// GATEWAY_URL. The SDK signs in as OpenCode's clients do on a password-protected server: HTTP Basic,
// here with the person's own username and password.

import assert from "node:assert/strict"
import { test } from "node:test"
import { createOpencodeClient } from "@opencode-ai/sdk/v2"

const baseUrl = process.env.GATEWAY_URL
assert.ok(baseUrl, "GATEWAY_URL must name a running gateway with the people of test_opencode_sdk.py")

const LOGINS = { alice: "alice-pass", carol: "carol-pass" }
const SCHEMA = { type: "object", properties: { ship: { type: "boolean", title: "Ship it?" } }, required: ["ship"] }

function as(person) {
  const token = Buffer.from(`${person}:${LOGINS[person]}`).toString("base64")
  return createOpencodeClient({ baseUrl, headers: { Authorization: `Basic ${token}` } })
}

/** A tool asking through POST /elicit (the tool side needs no login here); resolves to its result. */
async function elicit(to) {
  const response = await fetch(new URL("/elicit", baseUrl), {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ mode: "form", message: "Release 1.4", requestedSchema: SCHEMA, to }),
  })
  assert.equal(response.status, 200)
  return response.json()
}

async function listed(client) {
  const { response, data } = await client.question.list()
  assert.equal(response.status, 200)
  return data.map((request) => request.id)
}

async function untilListed(client) {
  for (let tries = 0; tries < 1500; tries++) {
    const found = await listed(client)
    if (found.length) return found
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  throw new Error("no question listed within 30 s")
}

test("each person sees and answers only the questions addressed to them; the tool learns who", async () => {
  const alice = as("alice")
  const carol = as("carol")
  const tool = elicit(["alice"])
  const [requestID] = await untilListed(alice)
  assert.deepEqual(await listed(carol), [], "carol does not see alice's question")

  const refused = await carol.question.reply({ requestID, answers: [["Yes"]] })
  assert.equal(refused.response.status, 404, "for carol the question does not exist")
  assert.equal(refused.error._tag, "QuestionNotFoundError")

  const replied = await alice.question.reply({ requestID, answers: [["Yes"]] })
  assert.equal(replied.response.status, 200)
  assert.deepEqual(await tool, { action: "accept", content: { ship: true }, answeredBy: "alice" })
})

test("a question streams only to the people it is for", async () => {
  const carol = as("carol")
  const abort = new AbortController()
  const { stream } = await carol.event.subscribe(undefined, { signal: abort.signal })
  const seen = []
  const reading = (async () => {
    for await (const event of stream) seen.push(event)
  })().catch(() => {})
  try {
    const forAlice = elicit(["alice"])
    const [aliceID] = await untilListed(as("alice"))
    const forCarol = elicit(["carol"])
    const [carolID] = await untilListed(carol)
    for (let tries = 0; tries < 1500 && !seen.some((e) => e.type === "question.asked"); tries++) {
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    const asked = seen.filter((e) => e.type === "question.asked").map((e) => e.properties.id)
    assert.deepEqual(asked, [carolID], "carol's stream carries her question alone")
    await as("alice").question.reject({ requestID: aliceID })
    await carol.question.reject({ requestID: carolID })
    assert.deepEqual(await forAlice, { action: "cancel", answeredBy: "alice" })
    assert.deepEqual(await forCarol, { action: "cancel", answeredBy: "carol" })
  } finally {
    abort.abort()
    await reading
  }
})

test("a wrong password gets 401 and sees nothing", async () => {
  const token = Buffer.from("alice:wrong").toString("base64")
  const intruder = createOpencodeClient({ baseUrl, headers: { Authorization: `Basic ${token}` } })
  const { response } = await intruder.question.list()
  assert.equal(response.status, 401)
})
