import { SchemaError } from '../../../lib/errors.js';
import { buildSchemaRegistry } from '../../../lib/schema/collection-schema.js';
import type { CollectionDefinition } from '../../../lib/schema/definitions.js';
import { describeUndeclared, emptyDatabaseState, findRollbackProblems, planMigration, type AppliedCollection, type DatabaseState, type MigrationPlan } from '../../../lib/schema/plan-migration.js';
import { STORAGE_KINDS } from '../../../lib/schema/storage-kinds.js';

const collections = (defs: CollectionDefinition[]) => buildSchemaRegistry(defs).collections;

const OLD: CollectionDefinition[] = [{ name: 'notes', fields: [{ name: 'title', type: 'text' }] }];
const NEW: CollectionDefinition[] = [
  { name: 'notes', fields: [{ name: 'title', type: 'text' }, { name: 'rating', type: 'number' }] },
  { name: 'tags', fields: [{ name: 'label', type: 'text' }] },
];

/**
 * The database state a sync of `plan` leaves behind, given the state it planned against: the
 * columns its collections declare (as the planner's DDL makes them), its indexes and its bookkeeping rows.
 * Lets a unit test play a sequence of releases on one database without one.
 */
function afterSync(state: DatabaseState, defs: CollectionDefinition[], plan: MigrationPlan): DatabaseState {
  const tables = new Map([...state.tables].map(([name, columns]) => [name, new Map(columns)]));
  for (const c of collections(defs)) {
    const columns = tables.get(c.table) ?? new Map<string, string>();
    for (const f of c.fields) if (!columns.has(f.column)) columns.set(f.column, f.system && f.name !== 'id' ? 'timestamp with time zone' : STORAGE_KINDS[f.storage].dataType);
    tables.set(c.table, columns);
  }
  const indexes = new Set([...state.indexes, ...plan.statements.flatMap((s) => /INDEX IF NOT EXISTS "([^"]+)"/.exec(s)?.slice(1) ?? [])]);
  return { ...state, tables, indexes, applied: new Map([...state.applied, ...plan.applied]), metaTableExists: true, settingsTableExists: true };
}

/** Plans `defs` against `state` and returns the plan with the state after it was applied. */
function sync(state: DatabaseState, defs: CollectionDefinition[]): { plan: MigrationPlan; state: DatabaseState } {
  const plan = planMigration(collections(defs), state);
  return { plan, state: afterSync(state, defs, plan) };
}

function refusal(defs: CollectionDefinition[], state: DatabaseState): string {
  try {
    planMigration(collections(defs), state);
  } catch (error) {
    expect(error).toBeInstanceOf(SchemaError);
    return (error as Error).message;
  }
  throw new Error('expected the plan to be refused');
}

describe('planMigration: older code on a newer database', () => {
  const newer = sync(emptyDatabaseState(), NEW).state;

  test('a column no field declares and a table no collection declares are left alone and named, with no DDL', () => {
    const { plan } = sync(newer, OLD);
    expect(plan.statements).toEqual([]);
    expect(plan.undeclared).toEqual({ tables: ['tags'], columns: [{ collection: 'notes', column: 'rating' }] });
    expect(describeUndeclared(plan.undeclared)).toBe(
      `schema: left alone, as no collection or field here declares them (a newer release's, or a removed field's not yet dropped): table "tags", column "notes"."rating"`,
    );
  });

  test('the newer fields keep their record in the bookkeeping: nothing is written, and new -> old -> new plans nothing', () => {
    const old = sync(newer, OLD);
    expect(old.plan.applied.size).toBe(0);
    expect(old.state.applied.get('notes')!.fields.map((f) => f.name)).toEqual(['title', 'rating']);
    const again = sync(old.state, NEW);
    expect(again.plan.statements).toEqual([]);
    expect(again.plan.applied.size).toBe(0);
    expect(again.plan.undeclared).toEqual({ tables: [], columns: [] });
  });

  test('older code that adds a field of its own keeps the newer ones beside it', () => {
    const branch: CollectionDefinition[] = [{ name: 'notes', fields: [{ name: 'title', type: 'text' }, { name: 'done', type: 'bool' }] }];
    const { plan, state } = sync(newer, branch);
    expect(plan.statements).toEqual(['ALTER TABLE "notes" ADD COLUMN "done" boolean NOT NULL DEFAULT false']);
    expect(plan.applied.get('notes')!.fields).toEqual([
      { name: 'title', type: 'text', multiple: false },
      { name: 'done', type: 'bool', multiple: false },
      { name: 'rating', type: 'number', multiple: false },
    ]);
    // The newer release, started again, finds its field as it left it and adds nothing.
    const merged: CollectionDefinition[] = [
      { name: 'notes', fields: [{ name: 'title', type: 'text' }, { name: 'rating', type: 'number' }, { name: 'done', type: 'bool' }] },
      { name: 'tags', fields: [{ name: 'label', type: 'text' }] },
    ];
    expect(sync(state, merged).plan.statements).toEqual([]);
  });

  test('a field whose column was dropped loses its record, so the name can come back with another type', () => {
    const dropped = { ...newer, tables: new Map([...newer.tables].map(([t, cols]) => [t, new Map([...cols].filter(([c]) => c !== 'rating'))])) };
    const { plan, state } = sync(dropped, OLD);
    expect(plan.applied.get('notes')!.fields.map((f) => f.name)).toEqual(['title']);
    const renewed: CollectionDefinition[] = [{ name: 'notes', fields: [{ name: 'title', type: 'text' }, { name: 'rating', type: 'text' }] }];
    expect(sync(state, renewed).plan.statements).toEqual(['ALTER TABLE "notes" ADD COLUMN "rating" text NOT NULL DEFAULT \'\'']);
  });

  test('a newer field the older code does not declare is no type change: a recorded field declared again with another type still is', () => {
    const old = sync(newer, OLD).state;
    const message = refusal([{ name: 'notes', fields: [{ name: 'title', type: 'text' }, { name: 'rating', type: 'text' }] }], old);
    expect(message).toContain('collection "notes", field "rating": type change from number to text cannot be applied safely; change it in a migration (docs/collections.md, Changing your schema)');
  });

  test('a declared field whose column has another type refuses, naming collection, field and what to do', () => {
    const handMade: DatabaseState = { ...emptyDatabaseState(), tables: new Map([['notes', new Map([['id', 'text'], ['created', 'timestamp with time zone'], ['updated', 'timestamp with time zone'], ['title', 'integer']])]]) };
    expect(refusal(OLD, handMade)).toBe(
      'collection "notes", field "title": the column is integer but the field needs text; change its type in a migration (docs/collections.md, Changing your schema), or declare the field as the column is',
    );
  });

  test('the info line names at most 20 objects and counts the rest', () => {
    const columns = Array.from({ length: 25 }, (_, i) => ({ collection: 'notes', column: `c${i}` }));
    const line = describeUndeclared({ tables: [], columns })!;
    expect(line).toContain('column "notes"."c19", and 5 more');
    expect(line).not.toContain('"c20"');
    expect(describeUndeclared({ tables: [], columns: [] })).toBeUndefined();
  });
});

describe('every column recordbase adds takes older code inserts that do not name it', () => {
  test.each(Object.entries(STORAGE_KINDS))('%s: nullable or with a default', (_kind, spec) => {
    expect(!/NOT NULL/i.test(spec.columnDdl) || /DEFAULT/i.test(spec.columnDdl)).toBe(true);
  });
});

describe('planMigration: a declared type the database held before a migration (issue 45)', () => {
  const NUMBER_RATING: CollectionDefinition[] = [{ name: 'notes', fields: [{ name: 'title', type: 'text' }, { name: 'rating', type: 'number' }] }];
  const TEXT_RATING: CollectionDefinition[] = [{ name: 'notes', fields: [{ name: 'title', type: 'text' }, { name: 'rating', type: 'text' }] }];
  const older = sync(emptyDatabaseState(), TEXT_RATING).state;
  /** The database after a migration "002_rating" turned rating into a number, with the schema it found recorded. */
  const migrated: DatabaseState = {
    ...sync({ ...older, tables: new Map([['notes', new Map([...older.tables.get('notes')!, ['rating', 'double precision']])]]), applied: new Map() }, NUMBER_RATING).state,
    before: [
      { migration: '003_later', applied: new Map([['notes', { id: 'x', fields: [{ name: 'rating', type: 'number', multiple: false }] }]]) },
      { migration: '002_rating', applied: older.applied },
      { migration: '001_first', applied: older.applied },
    ],
  };

  test('the older code is told it is older than the database, naming the migration that changed the field and what to do', () => {
    expect(refusal(TEXT_RATING, migrated)).toBe(
      'collection "notes", field "rating": this code declares it text, as the database held it before migration "002_rating" changed it: this code is older than the database. ' +
        'Deploy the newer release\'s code, or revert "002_rating" first with `recordbase migrate down`, run with a migrations folder that holds it (docs/collections.md, Rolling back a migration)',
    );
  });

  test('a type no recorded schema had is the usual refusal pointing at a migration', () => {
    expect(refusal([{ name: 'notes', fields: [{ name: 'title', type: 'text' }, { name: 'rating', type: 'bool' }] }], migrated)).toContain('type change from number to bool cannot be applied safely; change it in a migration');
  });
});

describe('findRollbackProblems: what stops the release before a migration from starting after its down (issue 45)', () => {
  const TEXT_RATING: CollectionDefinition[] = [{ name: 'notes', fields: [{ name: 'title', type: 'text' }, { name: 'rating', type: 'text' }] }];
  const synced = sync(emptyDatabaseState(), TEXT_RATING).state;
  const before = synced.applied;
  /** `synced` with rating's column and record changed. */
  function withRating(column: string | undefined, recorded: string | undefined, id = before.get('notes')!.id): DatabaseState {
    const columns = new Map(synced.tables.get('notes')!);
    if (column === undefined) columns.delete('rating');
    else columns.set('rating', column);
    const fields = before.get('notes')!.fields.flatMap((f) => (f.name !== 'rating' ? [f] : recorded === undefined ? [] : [{ ...f, type: recorded }]));
    const applied = new Map<string, AppliedCollection>([['notes', { id, fields }]]);
    return { ...synced, tables: new Map([['notes', columns]]), applied };
  }

  test('the schema as the up found it, or with the field gone (the release adds it again, empty): nothing', () => {
    expect(findRollbackProblems(before, synced)).toEqual([]);
    expect(findRollbackProblems(before, withRating(undefined, undefined))).toEqual([]);
    expect(findRollbackProblems(undefined, synced)).toEqual([]);
  });

  test('a field left as the up made it: named, with the helper that converts it back', () => {
    expect(findRollbackProblems(before, withRating('double precision', 'number'))).toEqual([
      `collection "notes", field "rating": the release before has it as text, but it is number; convert it back in the down: m.changeFieldType("notes", "rating", { to: 'text' })`,
    ]);
    // Recorded as before, but the column of another kind (no record of it: the column alone says).
    expect(findRollbackProblems(before, withRating('double precision', undefined))).toEqual([
      `collection "notes", field "rating": the release before has it as text (a text column), but its column is double precision; convert it back in the down: m.changeFieldType("notes", "rating", { to: 'text' })`,
    ]);
  });

  test("SQL that changed a column and left the record: refused with or without the up's schema, once per field", () => {
    const problem = `collection "notes", field "rating": recorded as number (a double precision column), but its column is text; after SQL that changes a column's type, record the field's type with m.changeFieldType("notes", "rating", { to: '<type>' }) (it converts nothing when the column is already of that type)`;
    expect(findRollbackProblems(before, withRating('text', 'number'))).toEqual([problem]);
    expect(findRollbackProblems(undefined, withRating('text', 'number'))).toEqual([problem]);
  });

  test('a changed collection id', () => {
    expect(findRollbackProblems(before, withRating('text', 'text', 'pbc_other'))).toEqual([`collection "notes": recorded with the id "pbc_other", but the release before had "${before.get('notes')!.id}"`]);
  });
});
