import express, { type RequestHandler } from 'express';
import { describeError, RecordbaseError } from '../errors.js';
import type { RealtimeHub } from '../realtime/realtime-hub.js';
import type { MultipartReader } from './read-multipart.js';
import type { Route } from './route-table.js';
import { readJsonBody } from './read-json-body.js';
import type { CallerResolver } from './resolve-caller.js';

/** What the realtime routes need from the router. */
export interface RealtimeRoutesOptions {
  hub: RealtimeHub;
  resolveCaller: CallerResolver;
  maxBodySize: number;
  readMultipart: MultipartReader;
}

/** PocketBase's answer to a POST without a clientId: 400 keyed `clientId`. */
function missingClientId(): RecordbaseError {
  return new RecordbaseError({
    ...describeError('invalid_subscription', 'Failed to load the submitted data due to invalid formatting.'),
    data: { clientId: { code: 'validation_required', message: 'Missing required value.' } },
  });
}

/** A multipart `subscriptions` is one part, several parts, or one part holding a JSON array. */
function readSubscriptions(value: unknown): unknown {
  if (typeof value === 'string' && value.trim().startsWith('[')) {
    try {
      return JSON.parse(value);
    } catch {
      return value;
    }
  }
  return typeof value === 'string' ? [value] : value;
}

/**
 * `GET /api/realtime` (the event stream) and `POST /api/realtime` (set a client's subscriptions),
 * as docs/realtime.md describes. Mounted only when realtime is on; otherwise both fall through to
 * the JSON 404.
 */
export function createRealtimeRoutes(options: RealtimeRoutesOptions): Route[] {
  const json = express.json({ limit: options.maxBodySize, strict: false });
  const connect: RequestHandler = async (req, res) => {
    await options.hub.connect(req, res);
  };
  const subscribe: RequestHandler = async (req, res) => {
    let body: Record<string, unknown>;
    let subscriptions: unknown;
    if (req.is('multipart/form-data')) {
      const multipart = await options.readMultipart(req, res);
      await multipart.discard();
      body = multipart.fields;
      subscriptions = readSubscriptions(body.subscriptions);
    } else {
      body = readJsonBody(req);
      subscriptions = body.subscriptions;
    }
    const clientId = body.clientId;
    if (typeof clientId !== 'string' || clientId === '') throw missingClientId();
    if (clientId.length > 255) {
      throw new RecordbaseError({
        ...describeError('invalid_subscription', 'Failed to load the submitted data due to invalid formatting.'),
        data: { clientId: { code: 'validation_max_text_constraint', message: 'Must be no more than 255 character(s).' } },
      });
    }
    if (subscriptions !== undefined && subscriptions !== null && !Array.isArray(subscriptions)) {
      throw new RecordbaseError({
        ...describeError('invalid_subscription', 'Failed to load the submitted data due to invalid formatting.'),
        data: { subscriptions: { code: 'validation_invalid_value', message: 'Must be a list of strings.' } },
      });
    }
    const caller = await options.resolveCaller(req);
    await options.hub.setSubscriptions(clientId, caller.request.auth, (subscriptions ?? []) as string[]);
    res.status(204).end();
  };
  return [
    { method: 'GET', path: '/api/realtime', handlers: [connect] },
    { method: 'POST', path: '/api/realtime', handlers: [json, subscribe] },
  ];
}
