import vm from 'node:vm';

// Jest runs ES modules only under Node's --experimental-vm-modules (vm.SourceTextModule exists only
// then), which `npm test` passes; `npx jest <file>` alone would fail every suite with "Cannot use
// import statement outside a module". Say what to run instead.
if (typeof vm.SourceTextModule !== 'function') {
  throw new Error(
    "recordbase's test suites run as ES modules, which Jest can do only under Node's --experimental-vm-modules: run `npm test -- <file>` (or `NODE_OPTIONS=--experimental-vm-modules npx jest <file>`), not a bare `npx jest <file>`.",
  );
}

/** Jest runs the TypeScript sources as ES modules (the package is ESM; jimp's webp codec needs it). */
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json', diagnostics: { ignoreCodes: [151002] } }],
  },
  testMatch: ['<rootDir>/spec/**/*.test.ts'],
  globalSetup: '<rootDir>/spec/support/global-setup.ts',
  globalTeardown: '<rootDir>/spec/support/global-teardown.ts',
  testTimeout: 30000,
};
