/**
 * Object bytes in and out of the chunk rows, one chunk at a time: a body streaming in is hashed as it arrives and cut
 * into `CHUNK_BYTES` rows (at most two chunks' worth held at once); a read streams the rows of a byte range a few at a
 * time. Neither ever holds a whole object.
 */
import { type BlobRef, CHUNK_BYTES, ObjectsRepo } from "@cp/persistence"
import { Data, Effect, Exit, Option, Stream } from "effect"
import { createHash } from "node:crypto"

/** The first bytes of a body kept to look for a JSON `references` array: larger objects are not scanned. */
export const MAX_SCANNED_BYTES = 4 * 1024 * 1024

/** A body written into a blob: its size, SHA-256 (hex), and its bytes when small enough to scan for references. */
export interface WrittenBlob {
  readonly blob: BlobRef
  readonly sha256: string
  /** The whole body when it is at most `MAX_SCANNED_BYTES` and starts like a JSON object, else undefined. */
  readonly scanned: Uint8Array | undefined
}

/** Chunks read per statement while streaming out. */
const READ_AHEAD = 2

const startsLikeJsonObject = (bytes: Uint8Array): boolean => {
  for (const byte of bytes) {
    if (byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09) continue
    return byte === 0x7b // "{"
  }
  return true // only whitespace so far: undecided
}

/**
 * Streams `body` into chunk rows of blob `blobId`, hashing it on the way. On any failure or interruption (a body
 * cut short, a client gone, a body over its cap) the chunks written so far are deleted before the failure goes on.
 */
export const writeBlob = <E>(
  objects: ObjectsRepo["Service"],
  blobId: string,
  body: Stream.Stream<Uint8Array, E>,
  now: Date
): Effect.Effect<WrittenBlob, E> =>
  Effect.suspend(() => {
    const hash = createHash("sha256")
    let pending: Array<Uint8Array> = []
    let pendingBytes = 0
    let seq = 0
    let size = 0
    let scanned: Array<Uint8Array> | undefined = []
    const writeOne = (length: number) => {
      const joined = Buffer.concat(pending)
      const data = joined.subarray(0, length)
      const rest = joined.subarray(length)
      pending = rest.length === 0 ? [] : [rest]
      pendingBytes = rest.length
      const chunk = { blobId, seq, data, createdAt: now }
      seq += 1
      return objects.writeChunk(chunk)
    }
    const flushFull: Effect.Effect<void> = Effect.suspend(() =>
      pendingBytes >= CHUNK_BYTES ? Effect.andThen(writeOne(CHUNK_BYTES), flushFull) : Effect.void
    )
    const consume = Stream.runForEach(body, (bytes) =>
      Effect.suspend(() => {
        if (bytes.length === 0) return Effect.void
        hash.update(bytes)
        size += bytes.length
        if (scanned !== undefined) {
          scanned.push(bytes)
          if (size > MAX_SCANNED_BYTES || !startsLikeJsonObject(bytes)) scanned = undefined
        }
        pending.push(bytes)
        pendingBytes += bytes.length
        return flushFull
      }))
    return consume.pipe(
      Effect.andThen(Effect.suspend(() => pendingBytes > 0 ? writeOne(pendingBytes) : Effect.void)),
      Effect.map((): WrittenBlob => ({
        blob: { id: blobId, size },
        sha256: hash.digest("hex"),
        scanned: scanned === undefined ? undefined : Buffer.concat(scanned)
      })),
      Effect.onExit((exit) => Exit.isSuccess(exit) ? Effect.void : objects.deleteBlobs([blobId]))
    )
  })

/** What to read of one blob: its chunk rows `[fromSeq, toSeq]` and the byte window of the whole run of them. */
interface BlobSlice {
  readonly blobId: string
  readonly fromSeq: number
  readonly toSeq: number
  /** Bytes to skip at the start of chunk `fromSeq`. */
  readonly skip: number
  /** Bytes to send in all. */
  readonly length: number
}

/** The chunk rows holding bytes `[start, end)` of an object made of `blobs`, blob by blob. */
export const slicesOf = (blobs: ReadonlyArray<BlobRef>, start: number, end: number): ReadonlyArray<BlobSlice> => {
  const slices: Array<BlobSlice> = []
  let offset = 0
  for (const blob of blobs) {
    const from = Math.max(start, offset)
    const to = Math.min(end, offset + blob.size)
    if (from < to) {
      const localFrom = from - offset
      const localTo = to - offset
      slices.push({
        blobId: blob.id,
        fromSeq: Math.floor(localFrom / CHUNK_BYTES),
        toSeq: Math.floor((localTo - 1) / CHUNK_BYTES),
        skip: localFrom % CHUNK_BYTES,
        length: localTo - localFrom
      })
    }
    offset += blob.size
  }
  return slices
}

/** A stored blob ended before its recorded size: the store is damaged. */
export class BlobTruncated extends Data.TaggedError("BlobTruncated")<{ readonly blobId: string }> {}

/** Where a read stands: the slice, its next chunk row, and what is left to skip and to send of the slice. */
interface ReadState {
  readonly index: number
  readonly seq: number
  readonly skip: number
  readonly remaining: number
}

/**
 * Streams bytes `[start, end)` of an object made of `blobs`: each pull reads at most `READ_AHEAD` chunk rows (one
 * statement) and emits them, so a reader that stops pulling (a slow client, HTTP backpressure) stops the reads too.
 */
export const readRange = (
  objects: ObjectsRepo["Service"],
  blobs: ReadonlyArray<BlobRef>,
  start: number,
  end: number
): Stream.Stream<Uint8Array, BlobTruncated> => {
  const slices = slicesOf(blobs, start, end)
  const stateAt = (index: number): Option.Option<ReadState> =>
    Option.map(
      Option.fromUndefinedOr(slices[index]),
      (slice) => ({ index, seq: slice.fromSeq, skip: slice.skip, remaining: slice.length })
    )
  return Option.match(stateAt(0), {
    onNone: () => Stream.empty,
    onSome: (first) =>
      Stream.paginate(first, (state: ReadState) => {
        const slice = slices[state.index]
        if (slice === undefined) return Effect.succeed([[], Option.none()] as const)
        const count = Math.min(READ_AHEAD, slice.toSeq - state.seq + 1)
        return Effect.flatMap(objects.readChunks({ blobId: slice.blobId, fromSeq: state.seq, count }), (chunks) => {
          let skip = state.skip
          let remaining = state.remaining
          const out: Array<Uint8Array> = []
          for (const chunk of chunks) {
            const piece = chunk.subarray(skip, skip + remaining)
            skip = 0
            remaining -= piece.length
            out.push(piece)
          }
          const nextSeq = state.seq + count
          if (chunks.length < count || (nextSeq > slice.toSeq && remaining > 0)) {
            return Effect.fail(new BlobTruncated({ blobId: slice.blobId }))
          }
          const next = nextSeq <= slice.toSeq
            ? Option.some({ index: state.index, seq: nextSeq, skip: 0, remaining })
            : stateAt(state.index + 1)
          return Effect.succeed([out, next] as const)
        })
      })
  })
}
