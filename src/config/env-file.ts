/**
 * `.env` in the working directory, when there is one, into process.env, parsed by
 * Node's own reader (process.loadEnvFile): a variable already set in the environment
 * wins over the file's. `npm start` (scripts/start.js) reads the same file with the
 * same parser (util.parseEnv) to decide what to start, and runs the app in the same
 * directory, so the built app run by hand (`node dist/src/main.js`) and by `npm start`
 * read one configuration.
 */
export function readEnvFile(): void {
  try {
    process.loadEnvFile();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}
