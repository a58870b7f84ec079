/**
 * How a write's statement is sent, decided once per call from what the write needs:
 * - `autocommit`: its statements go straight to the pool, each committing on its own; a create
 *   is one insert (its relation check folded in), a delete one delete (its rule in it).
 * - `versioned`: an update's two autocommit statements, the read of the row with its version and
 *   the update of that version (its rule in it); when the row changed meanwhile or the rule
 *   refused, the update runs again as `unit`, which decides and says why.
 * - `unit`: inside a transaction (the one the write joins, or its own), under a row lock.
 */
export type WritePlan = 'autocommit' | 'versioned' | 'unit';

/** What a write needs that one autocommit statement cannot give it; each operation names its own. */
export type WriteNeeds =
  | {
      readonly operation: 'create';
      /** A unit (a batch, `records.api.transaction()`) to join. */
      readonly joinsUnit: boolean;
      /** A beforeCreate hook: it may write through the unit it is given. */
      readonly beforeHook: boolean;
      /** The create rule has conditions: they are checked on a row built from the write, a statement before the insert. */
      readonly ruleSeesRow: boolean;
    }
  | {
      readonly operation: 'update';
      readonly joinsUnit: boolean;
      /** A beforeUpdate hook. */
      readonly beforeHook: boolean;
      /** Uploads or a file field's value: the names kept and removed are computed from the locked row. */
      readonly files: boolean;
    }
  | {
      readonly operation: 'delete';
      readonly joinsUnit: boolean;
      /** A beforeDelete hook. */
      readonly beforeHook: boolean;
      /** Relations of other collections point at this one: references to unlink, records to cascade. */
      readonly backRelations: boolean;
    };

/** The plan of one write: a unit when it needs one, otherwise the fewest round trips its operation allows. */
export function planWrite(needs: WriteNeeds): WritePlan {
  if (needs.joinsUnit || needs.beforeHook) return 'unit';
  switch (needs.operation) {
    case 'create':
      return needs.ruleSeesRow ? 'unit' : 'autocommit';
    case 'update':
      return needs.files ? 'unit' : 'versioned';
    case 'delete':
      return needs.backRelations ? 'unit' : 'autocommit';
  }
}
