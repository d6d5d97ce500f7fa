import { StoreUnavailableError, type PlantStore } from './plant-store';
import { wrapStoreMethods } from './wrap-store';

/**
 * The same store, with every failure that `isUnavailable` recognises rethrown as a
 * StoreUnavailableError; and, once it is being closed, every call but `close` refused as
 * unavailable (a request still running when a shutdown's deadline closed the store answers 503,
 * not a 500 from a closed database), and `close` again resolving with the first. The token change
 * watch, a synchronous call, is wrapped the same way.
 */
export function reportingUnavailable(
  store: PlantStore,
  isUnavailable: (error: unknown) => boolean,
): PlantStore {
  const report = (error: unknown): never => {
    throw isUnavailable(error) ? new StoreUnavailableError({ cause: error }) : error;
  };
  let closing: Promise<unknown> | undefined;
  const closed = () => new StoreUnavailableError({ cause: new Error('The store is closed.') });
  const watch = store.tokenChanges;
  const wrapped = wrapStoreMethods(store, (name, method) =>
    name === 'close'
      ? (...args) => (closing ??= method(...args))
      : (...args) =>
          closing === undefined ? method(...args).catch(report) : Promise.reject(closed()),
  );
  if (watch === undefined) return wrapped;
  return {
    ...wrapped,
    tokenChanges: {
      version() {
        if (closing !== undefined) throw closed();
        try {
          return watch.version();
        } catch (error) {
          return report(error);
        }
      },
    },
  };
}
