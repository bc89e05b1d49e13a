import './styles.css';
import { App } from './app';
import { pickTransportWhenReady } from './transport';

const root = document.getElementById('app');
if (root) {
  void pickTransportWhenReady(window).then((t) => {
    const app = new App(t);
    root.replaceChildren(app.el);
    return app.start();
  });
}
