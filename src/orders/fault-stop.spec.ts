import { FaultStop } from './fault-stop';

describe('FaultStop (FAULT_STOP_AT)', () => {
  it('stops once, the nth time its point is reached, and never at another point', () => {
    const stop = jest.fn();
    const faults = new FaultStop({ point: 'before-write', nth: 3 }, stop);
    const write = jest.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      faults.reached('before-write');
      faults.reached('before-write');
      expect(stop).not.toHaveBeenCalled();
      faults.reached('before-write');
      expect(stop).toHaveBeenCalledTimes(1);
      expect(write).toHaveBeenCalledWith(expect.stringContaining(`pid ${process.pid} stops itself (SIGSTOP)`));
      faults.reached('before-write');
      expect(stop).toHaveBeenCalledTimes(1);
    } finally {
      write.mockRestore();
    }
  });

  it('does nothing when not armed (every real deployment)', () => {
    const stop = jest.fn();
    const faults = new FaultStop(null, stop);
    for (let i = 0; i < 5; i++) faults.reached('before-write');
    expect(stop).not.toHaveBeenCalled();
  });
});
