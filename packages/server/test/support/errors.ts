/** Reading typed wire errors in service tests: assert the class with `assert.instanceOf`, then read what it carries. */
import type { ValidationFailed } from "@cp/domain"
import { Schema } from "effect"

const Fields = Schema.Record(Schema.String, Schema.Array(Schema.String))

/** The fields a `ValidationFailed` names, with their messages; decoded, so a malformed body fails the test. */
export const fieldsOf = (error: ValidationFailed): Readonly<Record<string, ReadonlyArray<string>>> =>
  Schema.decodeUnknownSync(Fields)(error.error.details["fields"])
