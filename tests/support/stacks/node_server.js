// The conformance plans served by Node's http module (many proxies and gateways are built on it).
// `node node_server.js PLANS PORT`: an SSE answer is written piece by piece (chunked, keep-alive);
// a JSON one goes out with res.end(body), for which Node sets Content-Length itself.
"use strict";
const fs = require("fs");
const http = require("http");

const plans = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const sleep = (seconds) => new Promise((resolve) => setTimeout(resolve, seconds * 1000));

http.createServer((req, res) => {
  const parts = [];
  req.on("data", (part) => parts.push(part));
  req.on("end", async () => {
    const model = JSON.parse(Buffer.concat(parts).toString("utf8") || "{}").model;
    const entry = plans[model];
    if (!entry) {
      res.writeHead(404, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ error: { message: `no plan for model ${model}`, type: "invalid_request_error",
                                        param: "model", code: null } }));
      return;
    }
    const writes = entry.writes.map((data) => Buffer.from(data, "base64"));
    if (entry.headers["Content-Type"] === "application/json") {
      res.statusCode = entry.status;
      for (const [name, value] of Object.entries(entry.headers)) res.setHeader(name, value);
      res.end(Buffer.concat(writes)); // headers not sent yet: Node writes Content-Length
      return;
    }
    res.writeHead(entry.status, entry.headers);
    for (const [number, data] of writes.entries()) {
      if (number && entry.pause) await sleep(entry.pause);
      res.write(data);
    }
    res.end();
  });
}).listen(Number(process.argv[3]), "127.0.0.1");
