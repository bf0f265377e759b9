/**
 * A local HTTPS webhook receiver with a certificate from a throwaway CA (made with the `openssl` CLI), so the server
 * must trust the CA through `NODE_EXTRA_CA_CERTS` to deliver. The path picks the answer: `/ok/…` 200, `/fail/…` 500,
 * `/redirect/…` 301, `/gone/…` 410, `/hang/…` never answers, `/reset/…` drops the connection. Every request is kept.
 */
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { createServer, type Server } from "node:https"
import { tmpdir } from "node:os"
import { join } from "node:path"

export interface ReceivedRequest {
  readonly path: string
  readonly headers: Readonly<Record<string, string | Array<string> | undefined>>
  readonly body: string
}

export interface TestCa {
  /** The CA certificate's PEM file: what `NODE_EXTRA_CA_CERTS` names. */
  readonly caFile: string
  readonly key: string
  readonly cert: string
}

/** A CA and a leaf certificate for `localhost` and 127.0.0.1 it signed, in a fresh temporary directory. */
export const makeTestCa = (): TestCa => {
  const dir = mkdtempSync(join(tmpdir(), "webhook-ca-"))
  const file = (name: string) => join(dir, name)
  const openssl = (...args: Array<string>) => execFileSync("openssl", args, { stdio: "pipe" })
  openssl(
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-keyout",
    file("ca.key"),
    "-out",
    file("ca.pem"),
    "-days",
    "2",
    "-subj",
    "/CN=Webhook Test CA"
  )
  writeFileSync(file("leaf.ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n")
  openssl(
    "req",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-keyout",
    file("leaf.key"),
    "-out",
    file("leaf.csr"),
    "-subj",
    "/CN=localhost"
  )
  openssl(
    "x509",
    "-req",
    "-in",
    file("leaf.csr"),
    "-CA",
    file("ca.pem"),
    "-CAkey",
    file("ca.key"),
    "-CAcreateserial",
    "-out",
    file("leaf.pem"),
    "-days",
    "2",
    "-extfile",
    file("leaf.ext")
  )
  return {
    caFile: file("ca.pem"),
    key: readFileSync(file("leaf.key"), "utf8"),
    cert: readFileSync(file("leaf.pem"), "utf8")
  }
}

export interface Receiver {
  readonly url: (path: string) => string
  readonly received: Array<ReceivedRequest>
}

/** Starts the receiver for the current scope. */
export const startReceiver = (ca: TestCa) =>
  Effect.acquireRelease(
    Effect.callback<{ readonly server: Server; readonly receiver: Receiver }>((resume) => {
      const received: Array<ReceivedRequest> = []
      const server = createServer({ key: ca.key, cert: ca.cert }, (req, res) => {
        const chunks: Array<Buffer> = []
        req.on("data", (chunk: Buffer) => chunks.push(chunk))
        req.on("end", () => {
          const path = req.url ?? "/"
          received.push({ path, headers: req.headers, body: Buffer.concat(chunks).toString("utf8") })
          const kind = path.split("/")[1]
          if (kind === "hang") return
          if (kind === "reset") return req.socket.destroy()
          const status = kind === "fail" ? 500 : kind === "redirect" ? 301 : kind === "gone" ? 410 : 200
          if (status === 301) res.setHeader("location", "https://127.0.0.1/elsewhere")
          res.writeHead(status, { "content-type": "text/plain" }).end(`answer ${status}`)
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const address = server.address()
        const port = typeof address === "object" && address !== null ? address.port : 0
        resume(Effect.succeed({
          server,
          receiver: { url: (path: string) => `https://127.0.0.1:${port}${path}`, received }
        }))
      })
    }),
    ({ server }) =>
      Effect.callback<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  ).pipe(Effect.map(({ receiver }) => receiver))
