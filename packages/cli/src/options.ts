/** Helpers for turning parsed flags into request fields. */
import { Option, Record } from "effect"

/** `{ key: value }` when the option holds one, else `{}`: how an absent flag becomes an absent optional key. */
export const optionalKey = <const K extends string, A>(key: K, value: Option.Option<A>): { readonly [P in K]?: A } =>
  Option.match(value, { onNone: () => ({}), onSome: (present) => Record.singleton(key, present) })
