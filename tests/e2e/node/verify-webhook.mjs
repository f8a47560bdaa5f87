// Verifies webhooks as a receiver would, with the Standard Webhooks reference library (not the
// gateway's): reads {"secret", "deliveries": [{"headers", "body"}]} on stdin, prints one line a delivery:
// the parsed payload as JSON, or "refused: <reason>".
import { Webhook } from "standardwebhooks";

const input = JSON.parse(await new Promise((done) => {
  let text = "";
  process.stdin.on("data", (chunk) => { text += chunk; });
  process.stdin.on("end", () => done(text));
}));
const webhook = new Webhook(input.secret);
for (const delivery of input.deliveries) {
  try {
    console.log(JSON.stringify(webhook.verify(delivery.body, delivery.headers)));
  } catch (error) {
    console.log(`refused: ${error.message}`);
  }
}
