import { jest } from '@jest/globals';
import { RouteTable, runHandlers, type Route } from '../../../lib/http/route-table.js';
import type { Request, RequestHandler, Response } from 'express';

const noop: RequestHandler = () => undefined;
const routes: Route[] = [
  { method: 'GET', path: '/api/collections/:collection/records', handlers: [noop] },
  { method: 'GET', path: '/api/collections/:collection/records/:id', handlers: [noop] },
  { method: 'POST', path: '/api/collections/:collection/records', handlers: [noop] },
  { method: 'GET', path: '/api/files/:collection/:recordId/:filename', handlers: [noop] },
  { method: 'HEAD', path: '/api/files/:collection/:recordId/:filename', handlers: [noop] },
  { method: 'POST', path: '/api/files/token', handlers: [noop] },
];
const table = new RouteTable(routes);

describe('RouteTable: the router endpoints matched as Express matched them', () => {
  test('finds the route by method and path, with its parameters', () => {
    const match = table.find('GET', '/api/collections/posts/records/abc');
    expect(match?.route).toBe(routes[1]);
    expect(match?.params).toEqual({ collection: 'posts', id: 'abc' });
    expect(table.find('POST', '/api/collections/posts/records')?.route).toBe(routes[2]);
  });

  test('the same path with another method, or another number of segments, is no match', () => {
    expect(table.find('PUT', '/api/collections/posts/records')).toBeUndefined();
    expect(table.find('GET', '/api/collections/posts')).toBeUndefined();
    expect(table.find('GET', '/api/collections/posts/records/abc/more')).toBeUndefined();
    expect(table.find('GET', '/api/collections/posts/recordsx')).toBeUndefined();
  });

  test('literal segments match case-insensitively; parameters keep their case', () => {
    expect(table.find('GET', '/API/Collections/Posts/RECORDS')?.params).toEqual({ collection: 'Posts' });
  });

  test('one trailing slash is allowed, an empty segment is not a parameter', () => {
    expect(table.find('GET', '/api/collections/posts/records/')?.route).toBe(routes[0]);
    expect(table.find('GET', '/api/collections//records')).toBeUndefined();
    expect(table.find('GET', '/api/collections/posts/records//')).toBeUndefined();
  });

  test('parameters are decoded; a malformed escape is a URIError with status 400', () => {
    expect(table.find('GET', '/api/files/posts/r1/a%20b.png')?.params.filename).toBe('a b.png');
    expect(table.find('GET', '/api/files/posts/r1/a%2Fb.png')?.params.filename).toBe('a/b.png');
    let thrown: unknown;
    try {
      table.find('GET', '/api/files/posts/r1/%ZZ.png');
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(URIError);
    expect((thrown as { status?: number }).status).toBe(400);
  });

  test('HEAD uses a HEAD route where there is one, the GET route otherwise', () => {
    expect(table.find('HEAD', '/api/files/posts/r1/a.png')?.route).toBe(routes[4]);
    expect(table.find('HEAD', '/api/collections/posts/records/abc')?.route).toBe(routes[1]);
    expect(table.find('HEAD', '/api/files/token')).toBeUndefined();
  });

  test('methodsAt lists what is served at a path (for OPTIONS), HEAD wherever GET is', () => {
    expect(table.methodsAt('/api/collections/posts/records').sort()).toEqual(['GET', 'HEAD', 'POST']);
    expect(table.methodsAt('/api/files/token')).toEqual(['POST']);
    expect(table.methodsAt('/api/nothing')).toEqual([]);
  });
});

describe('runHandlers', () => {
  const req = {} as Request;
  const res = {} as Response;

  test('runs handlers in order through next(); the last next() reports nothing answered', () => {
    const seen: string[] = [];
    const outcomes: unknown[] = [];
    runHandlers([(_q, _s, next) => { seen.push('a'); next(); }, (_q, _s, next) => { seen.push('b'); next(); }], req, res, (err) => outcomes.push(err));
    expect(seen).toEqual(['a', 'b']);
    expect(outcomes).toEqual([undefined]);
  });

  test('a throw, next(err) or a rejection stops the chain with the error, once', async () => {
    const boom = new Error('boom');
    const outcomes: unknown[] = [];
    const never = jest.fn();
    runHandlers([() => { throw boom; }, never], req, res, (err) => outcomes.push(err));
    runHandlers([(_q, _s, next) => { next(boom); next(); }, never], req, res, (err) => outcomes.push(err));
    runHandlers([async () => { throw boom; }, never], req, res, (err) => outcomes.push(err));
    await new Promise((resolve) => setImmediate(resolve));
    expect(outcomes).toEqual([boom, boom, boom]);
    expect(never).not.toHaveBeenCalled();
  });

  test('a handler that answers without next() ends the chain, with no outcome', async () => {
    const outcomes: unknown[] = [];
    runHandlers([async () => undefined, jest.fn()], req, res, (err) => outcomes.push(err));
    await new Promise((resolve) => setImmediate(resolve));
    expect(outcomes).toEqual([]);
  });
});
