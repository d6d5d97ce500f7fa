// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** Imports a layer may not make: dependencies point main → app → http → service → store. */
const forbid = (...groups) => ({
  'no-restricted-imports': [
    'error',
    {
      patterns: groups.map((group) => ({
        group: [group],
        message: 'Imports point down the layers: main → app → http → service → store.',
      })),
    },
  ],
});

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'coverage/', 'data/', 'generated/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      eqeqeq: 'error',
    },
  },
  {
    files: ['src/store/sqlite/**', 'src/store/postgres/**', 'src/store/plant-store.ts'],
    rules: forbid('**/service/**', '**/http/**', '**/app', '**/config', '**/generated/**'),
  },
  {
    files: ['src/service/**'],
    rules: forbid('**/http/**', '**/app', '**/config', '**/generated/**'),
  },
  { files: ['src/http/**'], rules: forbid('**/app', '**/config', '**/store/sqlite/**') },
  {
    files: ['jest.config.js', 'test/**/*.js'],
    languageOptions: {
      sourceType: 'commonjs',
      globals: {
        module: 'writable',
        process: 'readonly',
        require: 'readonly',
        __dirname: 'readonly',
      },
    },
    // CommonJS: a file preloaded with `node --require` loads its modules with require().
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
