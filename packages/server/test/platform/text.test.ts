/** The shared text rule and the bounded JSON value (issue 10 items 3 and 4), as plain schema checks. */
import { Email, isStorableText, JsonValue, LineText, MAX_JSON_DEPTH, MultilineText, Text } from "@cp/domain"
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import { mailboxKey, normalizeEmail } from "../../src/identity/service.ts"

const nested = (depth: number) => JSON.parse(`${"[".repeat(depth)}0${"]".repeat(depth)}`)

describe("text", () => {
  it("refuses U+0000 and unpaired surrogates, keeps surrogate pairs", () => {
    for (const bad of ["\u0000", "a\u0000", "\ud800", "a\udc00b", "\ud83d", "x\ude00\ud83d"]) {
      assert.isFalse(isStorableText(bad), JSON.stringify(bad))
      assert.isFalse(Schema.is(Text)(bad), JSON.stringify(bad))
    }
    for (const good of ["", "plain", "🚀", "a\ud83d\ude00b", "tab\tnew\nline", "\u001b"]) {
      assert.isTrue(Schema.is(Text)(good), JSON.stringify(good))
    }
  })

  it("single-line text refuses controls and breaks; multi-line keeps tab, LF and CR", () => {
    for (const bad of ["a\nb", "a\tb", "\u001b[0m", "\u007f", "\u0085", "a\u2028b"]) {
      assert.isFalse(Schema.is(LineText)(bad), JSON.stringify(bad))
    }
    assert.isTrue(Schema.is(MultilineText)("one\r\n\ttwo"))
    for (const bad of ["\u0007", "\u001b", "\u007f", "\u0000"]) {
      assert.isFalse(Schema.is(MultilineText)(bad), JSON.stringify(bad))
    }
  })

  it("JSON values nest at most 32 levels, and a million levels do not overflow the check", () => {
    assert.strictEqual(MAX_JSON_DEPTH, 32)
    assert.isTrue(Schema.is(JsonValue)(nested(32)))
    assert.isTrue(Schema.is(JsonValue)(nested(0)))
    assert.isFalse(Schema.is(JsonValue)(nested(33)))
    assert.isFalse(Schema.is(JsonValue)(nested(1_000_000)))
    assert.isTrue(Schema.is(JsonValue)({ a: [{ b: "🚀" }] }))
    assert.isFalse(Schema.is(JsonValue)({ a: ["\u0000"] }))
    assert.isFalse(Schema.is(JsonValue)({ ["\ud800"]: 1 }))
  })
})

describe("email addresses", () => {
  it("refuse full-width, zero-width, format and control characters", () => {
    const isEmail = Schema.is(Email)
    assert.isTrue(isEmail(" ann@example.test "))
    assert.isTrue(isEmail("anne@bücher.example"))
    for (
      const bad of [
        "ann\u200b@example.test",
        "ann@exa\u200cmple.test",
        "\ufeffann@example.test",
        "ａnn@example.test",
        "ann＠example.test",
        "ann@example．test",
        "ann\u00ad@example.test",
        "ann@ex\u0000ample.test"
      ]
    ) {
      assert.isFalse(isEmail(bad), JSON.stringify(bad))
    }
  })

  it("one normalized address per mailbox, one rate-limit key per spelling", () => {
    assert.strictEqual(normalizeEmail(" Ann@Example.TEST. "), "ann@example.test")
    assert.strictEqual(normalizeEmail("Ann@Example.TEST"), "ann@example.test")
    // NFC: a decomposed é is the composed one.
    assert.strictEqual(normalizeEmail("re\u0301ne@example.test"), "r\u00e9ne@example.test")
    const key = mailboxKey("ann@xn--bcher-kva.example")
    for (const spelling of ["Ann@Bücher.Example.", "\"ann\"@bücher.example", "ANN@XN--BCHER-KVA.EXAMPLE"]) {
      assert.strictEqual(mailboxKey(spelling), key, spelling)
    }
    assert.notStrictEqual(mailboxKey("ann+x@example.test"), mailboxKey("ann@example.test"))
  })
})
