// Whether the requests an Express app serves share V8's hidden classes (maps), run by
// spec/integration/create-app-server.test.ts as its own process with --allow-natives-syntax.
// argv[2] is how the server is made: `app-server` (createAppServer from the built package) or
// `listen` (app.listen, as Express makes it). The route holds two requests at a time, so both
// are compared at the same point of their lives (past Express's init, its router and a property
// a middleware adds); ten such pairs, and the last pair's answer is printed as JSON:
// {"requestsShareMap": boolean, "responsesShareMap": boolean}.
import http from 'node:http';
import express from 'express';
import { createAppServer } from '../../dist/lib/index.js';

// Through Function, so that this file parses without the flag too.
const haveSameMap = new Function('a', 'b', 'return %HaveSameMap(a, b)');

const app = express();
app.use((req, _res, next) => {
  req.addedByMiddleware = true;
  next();
});
let held = [];
app.get('/pair/:n', (req, res) => {
  held.push({ req, res });
  if (held.length < 2) return;
  const [a, b] = held;
  held = [];
  const answer = { requestsShareMap: haveSameMap(a.req, b.req), responsesShareMap: haveSameMap(a.res, b.res) };
  a.res.json(answer);
  b.res.json(answer);
});

const server = process.argv[2] === 'app-server' ? createAppServer(app) : http.createServer(app);
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const agent = new http.Agent({ keepAlive: true, maxSockets: 2 });
const get = (path) =>
  new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port: server.address().port, path, agent }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => (body += chunk));
        res.on('end', () => resolve(JSON.parse(body)));
      })
      .on('error', reject);
  });
let last;
for (let i = 0; i < 10; i++) [last] = await Promise.all([get(`/pair/${2 * i}`), get(`/pair/${2 * i + 1}`)]);
process.stdout.write(JSON.stringify(last));
agent.destroy();
server.close();
