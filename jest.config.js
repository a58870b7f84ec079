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
