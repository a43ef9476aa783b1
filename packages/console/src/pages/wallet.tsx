/** One wallet. (To be built: balances per chain, history, today's spending, policy, pause/resume, archive.) */
export function WalletPage(props: { walletId: string }) {
  return (
    <section>
      <h1>Wallet {props.walletId}</h1>
    </section>
  );
}
