/** A minimal SMTP server on loopback that accepts every message and keeps it, so mail tests need no real server. */
import { Effect, type Scope } from "effect"
import { createServer, type Socket } from "node:net"

/** One accepted message: the envelope and the raw DATA (headers, blank line, body), dot-stuffing undone. */
export interface ReceivedMail {
  readonly from: string
  readonly recipients: ReadonlyArray<string>
  readonly data: string
}

export interface SmtpSink {
  /** `smtp://127.0.0.1:<port>`, ready for `SMTP_URL`. */
  readonly url: string
  readonly received: ReadonlyArray<ReceivedMail>
  /** Connections accepted so far: one per send attempt of a non-pooled client. */
  readonly connections: () => number
}

export interface SmtpSinkOptions {
  /** Answer every MAIL FROM with a temporary failure (451), as a server in trouble would. */
  readonly rejectMail?: boolean
}

const address = (argument: string) => /<([^>]*)>/.exec(argument)?.[1] ?? argument.trim()

const serve = (socket: Socket, received: Array<ReceivedMail>, options: SmtpSinkOptions) => {
  let buffer = ""
  let from = ""
  let recipients: Array<string> = []
  let data: Array<string> | undefined
  const reply = (line: string) => socket.write(`${line}\r\n`)
  const handle = (line: string) => {
    if (data !== undefined) {
      if (line !== ".") return void data.push(line.startsWith("..") ? line.slice(1) : line)
      received.push({ from, recipients, data: data.join("\r\n") })
      data = undefined
      recipients = []
      return reply("250 OK queued")
    }
    const [verb = "", ...rest] = line.split(" ")
    const argument = rest.join(" ")
    switch (verb.toUpperCase()) {
      case "EHLO":
      case "HELO":
        return reply("250 smtp-sink")
      case "MAIL":
        if (options.rejectMail === true) return reply("451 Try again later")
        from = address(argument.replace(/^FROM:/i, ""))
        return reply("250 OK")
      case "RCPT":
        recipients.push(address(argument.replace(/^TO:/i, "")))
        return reply("250 OK")
      case "DATA":
        data = []
        return reply("354 End data with <CR><LF>.<CR><LF>")
      case "RSET":
      case "NOOP":
        return reply("250 OK")
      case "QUIT":
        reply("221 Bye")
        return socket.end()
      default:
        return reply("502 Command not implemented")
    }
  }
  socket.setEncoding("utf8")
  socket.on("data", (chunk: string) => {
    buffer += chunk
    for (let end = buffer.indexOf("\r\n"); end >= 0; end = buffer.indexOf("\r\n")) {
      const line = buffer.slice(0, end)
      buffer = buffer.slice(end + 2)
      handle(line)
    }
  })
  socket.on("error", () => socket.destroy())
  reply("220 smtp-sink ESMTP")
}

/** Listens on an ephemeral loopback port for the current scope. */
export const startSmtpSink = (options: SmtpSinkOptions = {}): Effect.Effect<SmtpSink, never, Scope.Scope> =>
  Effect.gen(function*() {
    const received: Array<ReceivedMail> = []
    const sockets = new Set<Socket>()
    let connections = 0
    const server = createServer((socket) => {
      connections += 1
      sockets.add(socket)
      socket.on("close", () => sockets.delete(socket))
      serve(socket, received, options)
    })
    yield* Effect.acquireRelease(
      Effect.callback<void>((resume) => void server.listen(0, "127.0.0.1", () => resume(Effect.void))),
      () =>
        Effect.callback<void>((resume) => {
          server.close(() => resume(Effect.void))
          for (const socket of sockets) socket.destroy()
        })
    )
    const bound = server.address()
    if (bound === null || typeof bound === "string") return yield* Effect.die(new Error("SMTP sink is not on TCP"))
    return { url: `smtp://127.0.0.1:${bound.port}`, received, connections: () => connections }
  })

/** The value of one header of a received message (first occurrence, folded lines joined). */
export const header = (mail: ReceivedMail, name: string): string | undefined => {
  const head = mail.data.split("\r\n\r\n", 1)[0] ?? ""
  const unfolded = head.replace(/\r\n[ \t]+/g, " ")
  const prefix = `${name.toLowerCase()}:`
  return unfolded.split("\r\n").find((line) => line.toLowerCase().startsWith(prefix))?.slice(prefix.length).trim()
}

/** The body of a received message, after the header block. */
export const body = (mail: ReceivedMail): string => mail.data.slice(mail.data.indexOf("\r\n\r\n") + 4)
