import { createClearedFieldsWarning } from '../../../lib/records/cleared-fields-warning.js';
import type { CollectionSchema } from '../../../lib/schema/collection-schema.js';

const collection = (id: string) => ({ id, name: `name_${id}` }) as unknown as CollectionSchema;

describe('createClearedFieldsWarning', () => {
  it('warns once per collection per minute, names up to 20 fields, and nothing when nothing was cleared', () => {
    const lines: string[] = [];
    const log = (message: string) => void lines.push(message);
    let now = 0;
    const warn = createClearedFieldsWarning({ error: log, warn: log, info: log }, () => now);
    warn(collection('a'), []);
    expect(lines).toHaveLength(0);
    warn(collection('a'), ['owner']);
    warn(collection('a'), ['owner']);
    warn(collection('b'), Array.from({ length: 25 }, (_, i) => `f${i}`));
    expect(lines).toHaveLength(2);
    expect(lines[0]).toContain('"name_a"');
    expect(lines[1]).toContain('f19 and 5 more');
    expect(lines[1]).not.toContain('f20');
    now = 59_999;
    warn(collection('a'), ['owner']);
    expect(lines).toHaveLength(2);
    now = 60_000;
    warn(collection('a'), ['owner']);
    expect(lines).toHaveLength(3);
  });

  it('remembers a bounded number of collections', () => {
    let count = 0;
    const log = () => void count++;
    const warn = createClearedFieldsWarning({ error: log, warn: log, info: log }, () => 0);
    for (let i = 0; i < 1001; i++) warn(collection(`c${i}`), ['x']);
    expect(count).toBe(1001);
    // c0 was forgotten to make room, so it may warn again; c1000 is still remembered.
    warn(collection('c0'), ['x']);
    warn(collection('c1000'), ['x']);
    expect(count).toBe(1002);
  });
});
