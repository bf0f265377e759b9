/**
 * The undo journal that gives memory repositories the all-or-nothing behaviour of a SQL transaction: memory
 * repositories change their Maps through `atomically`, which records an undo closure whenever a transaction
 * (`Transactor.memory`) is in progress, and `undoOnFailure` replays those closures newest first when it fails.
 */
import { Context, Effect, Exit } from "effect"

/** Undo closures recorded so far, oldest first. */
export type Journal = Array<() => void>

/** The journal of the memory transaction in progress; undefined outside a transaction. */
export const UndoJournal = Context.Reference<Journal | undefined>("@cp/persistence/Memory/UndoJournal", {
  defaultValue: () => undefined
})

/** Synchronous writes to memory state that are reverted if the surrounding transaction fails. */
export interface Changes {
  /** Registers how to revert a change made by hand. */
  readonly recordUndo: (undo: () => void) => void
  /** `map.set` that restores the previous entry (or its absence) on rollback. */
  readonly set: <K, V extends {}>(map: Map<K, V>, key: K, value: V) => void
  /** `map.delete` that restores the entry on rollback. */
  readonly delete: <K, V extends {}>(map: Map<K, V>, key: K) => void
}

const changesFor = (journal: Journal | undefined): Changes => {
  const recordUndo = (undo: () => void) => {
    journal?.push(undo)
  }
  const restore = <K, V extends {}>(map: Map<K, V>, key: K) => {
    const previous = map.get(key)
    return previous === undefined ? () => void map.delete(key) : () => void map.set(key, previous)
  }
  return {
    recordUndo,
    set: (map, key, value) => {
      recordUndo(restore(map, key))
      map.set(key, value)
    },
    delete: (map, key) => {
      recordUndo(restore(map, key))
      map.delete(key)
    }
  }
}

/**
 * Runs a check-and-change on memory state in one synchronous step, so no other fiber can interleave between the
 * check and the write (the memory twin of a single SQL statement). `change` returns the outcome as an Effect.
 */
export const atomically = <A, E>(change: (changes: Changes) => Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.withFiber((fiber) => change(changesFor(fiber.getRef(UndoJournal))))

/**
 * Runs `self` with `journal` as the current journal and, on failure or interruption, reverts newest first only the
 * changes `self` recorded: a whole transaction at the top level, a savepoint when nested.
 */
export const undoOnFailure = <A, E, R>(self: Effect.Effect<A, E, R>, journal: Journal): Effect.Effect<A, E, R> =>
  Effect.suspend(() => {
    const mark = journal.length
    return self.pipe(
      Effect.provideService(UndoJournal, journal),
      Effect.onExit((exit) =>
        Exit.isSuccess(exit)
          ? Effect.void
          : Effect.sync(() => {
            for (const undo of journal.splice(mark).reverse()) undo()
          })
      )
    )
  })
