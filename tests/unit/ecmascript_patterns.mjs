// What a JavaScript engine makes of each pattern of a table, as JSON Schema reads `pattern`:
// `new RegExp(pattern, "u")`, searched in the text (not anchored).
// Usage: node ecmascript_patterns.mjs table.json
// The table is a JSON list of {"pattern", "text"}; prints one {"valid", "match"} per row, in order.
import { readFileSync } from "node:fs";

const rows = JSON.parse(readFileSync(process.argv[2], "utf8"));
const results = rows.map(({ pattern, text }) => {
  let compiled;
  try {
    compiled = new RegExp(pattern, "u");
  } catch (error) {
    return { valid: false, match: null, error: String(error.message) };
  }
  return { valid: true, match: compiled.test(text) };
});
process.stdout.write(JSON.stringify(results));
