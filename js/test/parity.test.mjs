// For every e2e scenario the JavaScript API must return the verdict the wasm policy returned.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const api = require("../pkg-node/cozystack_resolver.js");
const cases = JSON.parse(readFileSync(new URL("../../target/js/parity-cases.json", import.meta.url)));

test("there are parity cases", () => assert.ok(cases.length >= 40, `only ${cases.length} cases`));

for (const c of cases) {
  test(`parity: ${c.name}`, () => {
    const got = JSON.parse(api.evaluate(JSON.stringify(c.request), JSON.stringify(c.facts), JSON.stringify(c.settings)));
    assert.equal(got.allowed, c.expected.allowed);
    assert.equal(got.code ?? null, c.expected.code ?? null);
    assert.equal(got.message ?? null, c.expected.message ?? null);
    assert.deepEqual(got.warnings ?? [], c.expected.warnings);
  });
}

test("invalid settings are reported like validate_settings", () => {
  assert.equal(api.validateSettings('{"platformWriters":"maybe"}'), "platformWriters: unknown variant `maybe`, expected `warn` or `deny`");
  assert.equal(api.validateSettings("{}"), undefined);
});

test("malformed input throws with the field named", () => {
  assert.throws(() => api.evaluate("{", "{}", undefined), /request: EOF while parsing/);
});
