import { describe, expect, test } from '@jest/globals';
import { planWrite, type WritePlan } from '../../../lib/records/write-plan.js';

/**
 * Every combination of a write's needs, and the plan of each operation: a unit to join, a
 * before-hook, then the operation's own need (create: a rule that sees the row; update: files;
 * delete: back-relations).
 */
const PLANS: [joinsUnit: boolean, beforeHook: boolean, ownNeed: boolean, create: WritePlan, update: WritePlan, del: WritePlan][] = [
  [false, false, false, 'autocommit', 'versioned', 'autocommit'],
  [false, false, true, 'unit', 'unit', 'unit'],
  [false, true, false, 'unit', 'unit', 'unit'],
  [false, true, true, 'unit', 'unit', 'unit'],
  [true, false, false, 'unit', 'unit', 'unit'],
  [true, false, true, 'unit', 'unit', 'unit'],
  [true, true, false, 'unit', 'unit', 'unit'],
  [true, true, true, 'unit', 'unit', 'unit'],
];

describe('planWrite', () => {
  test.each(PLANS)('joinsUnit %s, beforeHook %s, own need %s -> create %s, update %s, delete %s', (joinsUnit, beforeHook, ownNeed, create, update, del) => {
    expect({
      create: planWrite({ operation: 'create', joinsUnit, beforeHook, ruleSeesRow: ownNeed }),
      update: planWrite({ operation: 'update', joinsUnit, beforeHook, files: ownNeed }),
      delete: planWrite({ operation: 'delete', joinsUnit, beforeHook, backRelations: ownNeed }),
    }).toEqual({ create, update, delete: del });
  });
});
